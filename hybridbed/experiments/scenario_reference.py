"""docs/scenario-reference.md, generated from the scenario's pydantic models and every registered policy's
`Params`, so the reference cannot drift from what the loader accepts (a unit test regenerates and compares).

    python -m hybridbed.experiments.scenario_reference > docs/scenario-reference.md
"""

from __future__ import annotations

import types
import typing
from typing import Any

from annotated_types import Ge, Gt, Le, Lt, MaxLen, MinLen
from pydantic import BaseModel
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined

from hybridbed.config.scenario import Scenario
from hybridbed.scheduler.policy import PolicyParams, registered_policies

HEADER = """# Scenario reference

Every field a scenario file may hold, generated from the models that check it
(`python -m hybridbed.experiments.scenario_reference > docs/scenario-reference.md`). A field without a
default must be given. Units are in the names: `_mbps` emulated Mb/s, `_s` seconds, `_mb`/`_gb` full-scale
sizes (multiplied by `scale`). What the sections mean, and examples: [scenarios.md](scenarios.md).
"""
CONSTRAINT_SYMBOLS = ((Gt, "gt", ">"), (Ge, "ge", ">="), (Lt, "lt", "<"), (Le, "le", "<="))


def _type_name(annotation: Any) -> str:
    origin = typing.get_origin(annotation)
    if origin is typing.Literal:
        return " \\| ".join(repr(a).replace("'", "`") for a in typing.get_args(annotation))
    if origin in (typing.Union, types.UnionType):
        return " or ".join(_type_name(a) for a in typing.get_args(annotation))
    if origin is not None:
        args = ", ".join(_type_name(a) for a in typing.get_args(annotation))
        return f"{getattr(origin, '__name__', str(origin))}[{args}]"
    if annotation is type(None):
        return "none"
    return getattr(annotation, "__name__", str(annotation))


def _constraints(field: FieldInfo) -> str:
    said = []
    for meta in field.metadata:
        for kind, attribute, symbol in CONSTRAINT_SYMBOLS:
            if isinstance(meta, kind):
                said.append(f"{symbol} {getattr(meta, attribute):g}")
        if isinstance(meta, MinLen):
            said.append(f"at least {meta.min_length} items")
        if isinstance(meta, MaxLen):
            said.append(f"at most {meta.max_length} items")
        if getattr(meta, "pattern", None):
            said.append(f"matches `{meta.pattern}`")
    return ", ".join(said)


def _default(field: FieldInfo) -> str:
    if field.default is PydanticUndefined and field.default_factory is None:
        return "required"
    value = field.default_factory() if field.default_factory is not None else field.default  # type: ignore[call-arg]
    if isinstance(value, BaseModel):
        return "(section)"
    if isinstance(value, float):
        return f"`{value:.6g}`"  # a derived default (a rate from a paper's figure) to six digits
    return f"`{value!r}`" if value not in (None, {}, []) else f"`{value}`"


def _nested_model(annotation: Any) -> type[BaseModel] | None:
    return annotation if isinstance(annotation, type) and issubclass(annotation, BaseModel) else None


def _field_row(name: str, field: FieldInfo, what: str | None = None) -> str:
    """A field's table row; `what` replaces its description (a nested section's link)."""
    what = what if what is not None else (field.description or "").replace("|", "\\|")
    return f"| `{name}` | {_type_name(field.annotation)} | {_default(field)} | {_constraints(field)} | {what} |"


def _model_tables(model: type[BaseModel], prefix: str) -> list[str]:
    """A table of the model's own fields, then one section per nested model."""
    lines = [
        f"## `{prefix}`" if prefix else "## top level",
        "",
        " ".join((model.__doc__ or "").strip().split("\n\n")[0].split()),
        "",
        "| field | type | default | allowed | what |",
        "|---|---|---|---|---|",
    ]
    nested = []
    for name, field in model.model_fields.items():
        sub = _nested_model(field.annotation)
        if sub is not None:
            nested.append((sub, f"{prefix}.{name}" if prefix else name))
        link = f"see [`{prefix + '.' if prefix else ''}{name}`](#{(prefix + name).replace('.', '').lower()})"
        lines.append(_field_row(name, field, link if sub is not None else None))
    lines.append("")
    for sub, path in nested:
        lines += _model_tables(sub, path)
    return [line for i, line in enumerate(lines) if line or (i and lines[i - 1])]  # no double blank lines


def _policy_tables() -> list[str]:
    lines = [
        "## `scheduler.policy_params.<policy>`",
        "",
        "Each policy's parameters, checked when the scenario loads (a comparison gives each setup its own).",
        "",
    ]
    for name, policy in sorted(registered_policies().items()):
        params = policy.Params
        if params is PolicyParams or not params.model_fields:
            continue
        lines += [f"### `{name}`", "", "| field | type | default | allowed | what |", "|---|---|---|---|---|"]
        lines += [_field_row(field_name, field) for field_name, field in params.model_fields.items()]
        lines.append("")
    return lines


def scenario_reference() -> str:
    return "\n".join([HEADER, *_model_tables(Scenario, ""), *_policy_tables()]).rstrip() + "\n"


if __name__ == "__main__":
    print(scenario_reference(), end="")
