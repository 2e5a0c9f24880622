"""The controller's REST API on hostile requests, over WSGI without a network: oversized and deeply nested bodies,
and a handler that fails, get a status and a one-line message, never a traceback, and change nothing."""

from __future__ import annotations

import json
import logging
from types import SimpleNamespace

from webob import Request

from hybridbed.controller.rest_api import MAX_JSON_DEPTH, FabricRestApi, body_limit_bytes


class Controller:
    """What the API reads of the os-ken app: the fabric's size, demand hints and a logger."""

    def __init__(self, racks: int = 4):
        self.fabric = SimpleNamespace(racks=racks, has_ocs=True, variant="hybrid")
        self.demand_hints = [[0.0] * racks for _ in range(racks)]
        self.logger = logging.getLogger("test-rest-api")

    def set_demand_hints(self, matrix):
        self.demand_hints = matrix


def put(api: FabricRestApi, path: str, body: bytes) -> tuple[int, dict]:
    request = Request.blank(path, method="PUT", body=body, content_type="application/json")
    response = request.get_response(api)
    return response.status_int, json.loads(response.body)


def test_a_body_over_the_limit_is_refused_unread_and_changes_nothing():
    controller = Controller()
    api = FabricRestApi(controller)
    limit = body_limit_bytes(4)
    status, answer = put(api, "/demand", b'{"demand": [' + b" " * limit + b"]}")
    assert status == 413 and f"{limit} byte limit" in answer["error"]
    assert controller.demand_hints == [[0.0] * 4 for _ in range(4)]
    assert body_limit_bytes(500) == 32 * 500 * 500  # a 500-rack demand matrix still fits


def test_deeply_nested_bodies_get_400():
    api = FabricRestApi(Controller())
    for depth in (MAX_JSON_DEPTH + 1, 100_000):
        status, answer = put(api, "/demand", b'{"demand": ' + b"[" * depth + b"]" * depth + b"}")
        assert status == 400 and "nested deeper" in answer["error"], (depth, answer)


def test_a_valid_matrix_is_taken_and_the_call_logged(caplog):
    controller = Controller(racks=2)
    api = FabricRestApi(controller)
    with caplog.at_level(logging.INFO, logger="test-rest-api"):
        status, answer = put(api, "/demand", json.dumps({"demand": [[0, 5], [3, 0]]}).encode())
    assert status == 200 and controller.demand_hints == [[0, 5], [3, 0]]
    assert "api PUT /demand -> 200 OK" in caplog.text


def test_an_unexpected_failure_is_a_500_with_one_line_and_the_traceback_in_the_log(caplog):
    controller = Controller(racks=2)

    def broken(matrix):
        raise KeyError("boom")

    controller.set_demand_hints = broken
    api = FabricRestApi(controller)
    with caplog.at_level(logging.INFO, logger="test-rest-api"):
        status, answer = put(api, "/demand", json.dumps({"demand": [[0, 5], [3, 0]]}).encode())
    assert status == 500 and answer == {"error": "internal error: KeyError; see the controller log"}
    assert "Traceback" in caplog.text and "boom" in caplog.text
