"""Turning pydantic's validation errors into one message per problem, each naming the field and the value,
so a bad scenario or command-line value is reported before anything is created."""

from __future__ import annotations

from typing import TypeVar

from pydantic import BaseModel, ValidationError

Model = TypeVar("Model", bound=BaseModel)


class SpecError(ValueError):
    """A specification value is invalid; the message names the field."""


def describe_validation_error(err: ValidationError, prefix: str = "") -> str:
    """One line per problem, each naming the field path and the offending value."""
    lines = []
    for problem in err.errors():
        field = ".".join([prefix, *map(str, problem["loc"])] if prefix else map(str, problem["loc"]))
        # a validator's own message names its fields; pydantic's wrapper around it adds nothing
        message = str(problem["ctx"]["error"]) if problem["type"] == "value_error" else problem["msg"]
        value = problem.get("input")
        shown = "" if isinstance(value, dict) else f" (got {value!r})"
        lines.append(f"{field}: {message}{shown}" if field else message)
    return "; ".join(lines)


def parse_spec(model: type[Model], data: dict, prefix: str = "") -> Model:
    """Validate `data` against `model`, raising SpecError with field names instead of pydantic's dump."""
    try:
        return model.model_validate(data)
    except ValidationError as err:
        raise SpecError(describe_validation_error(err, prefix)) from None
