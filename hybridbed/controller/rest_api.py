"""REST API of the fabric controller on 127.0.0.1 (Ryu convention: JSON in, JSON out).

GET  /status    switches connected and ready, mode, circuit count
GET  /circuits  the lit circuits
PUT  /circuits  {"circuits": [{"src_rack": a, "dst_rack": b, "src_port": 0, "dst_port": 0}, ...]}
                pinned mode only; answers once the new circuits carry traffic, with the event
GET  /events    every reconfiguration: requested, dark_from, dark_until, done, circuits before/after
GET  /demand    demand hints, measured demand, and what periodic mode matches on
PUT  /demand    {"demand": [[bytes from rack a to rack b, ...], ...]} (hints)
GET  /ports     OpenFlow port counters of every switch

Invalid input gets HTTP 400 with {"error": message} and leaves the state as it was; a body larger than a demand
matrix of the fabric could be gets 413 unread, and one nested deeper than any request needs gets 400. Every
mutating call is logged to the controller's log with its outcome. An unexpected error is logged there with
its traceback and answered 500 with a one-line message, never the traceback.
"""

from __future__ import annotations

import json
from collections.abc import Callable

from routes import Mapper
from webob import Request, Response

from hybridbed.controller.circuits import ConfigurationError, configuration_as_list, parse_configuration, parse_demand

MIN_BODY_LIMIT_BYTES = 1 << 20
BYTES_PER_MATRIX_ENTRY = 32  # a float in JSON with its separator, generously
MAX_JSON_DEPTH = 8  # a demand matrix is 3 deep (object, rows, numbers), a circuit list 3


class RequestTooLarge(Exception):
    pass


def body_limit_bytes(racks: int) -> int:
    """The largest body the API reads: a demand matrix of `racks` x `racks` numbers, at least 1 MiB."""
    return max(MIN_BODY_LIMIT_BYTES, BYTES_PER_MATRIX_ENTRY * racks * racks)


def _depth(value: object) -> int:
    if isinstance(value, dict):
        return 1 + max(map(_depth, value.values()), default=0)
    if isinstance(value, list):
        return 1 + max(map(_depth, value), default=0)
    return 0


def _json(status: int, body: object) -> Response:
    return Response(status=status, content_type="application/json", charset="utf-8", body=json.dumps(body).encode())


def _body(request: Request, key: str, limit: int) -> object:
    """The request's JSON object's `key`, read only if the body is within `limit` bytes."""
    if request.content_length is not None and request.content_length > limit:
        raise RequestTooLarge(f"request body of {request.content_length} bytes is over the {limit} byte limit")
    raw = request.body_file.read(limit + 1)
    if len(raw) > limit:
        raise RequestTooLarge(f"request body is over the {limit} byte limit")
    try:
        data = json.loads(raw or b"")
    except RecursionError:
        raise ConfigurationError(f"request body is nested deeper than {MAX_JSON_DEPTH} levels") from None
    except ValueError as err:
        raise ConfigurationError(f"request body is not valid JSON: {err}") from None
    if _depth(data) > MAX_JSON_DEPTH:
        raise ConfigurationError(f"request body is nested deeper than {MAX_JSON_DEPTH} levels")
    if not isinstance(data, dict) or key not in data:
        raise ConfigurationError(f'request body must be a JSON object with "{key}"')
    return data[key]


class FabricRestApi:
    """Maps HTTP requests onto the controller's methods; holds no state of its own."""

    def __init__(self, controller):
        self.c = controller
        self.body_limit = body_limit_bytes(controller.fabric.racks)
        self.mapper = Mapper()
        for path, method, handler in [
            ("/status", "GET", self.status),
            ("/circuits", "GET", self.get_circuits),
            ("/circuits", "PUT", self.put_circuits),
            ("/events", "GET", self.get_events),
            ("/demand", "GET", self.get_demand),
            ("/demand", "PUT", self.put_demand),
            ("/ports", "GET", self.get_ports),
        ]:
            self.mapper.connect(path, handler=handler, conditions={"method": [method]})

    def __call__(self, environ, start_response):
        request = Request(environ)
        match = self.mapper.match(environ=environ)
        if match is None:
            response = _json(404, {"error": f"no such resource: {request.method} {request.path}"})
        else:
            handler: Callable[[Request], Response] = match["handler"]
            try:
                response = handler(request)
            except ConfigurationError as err:
                response = _json(400, {"error": str(err)})
            except RequestTooLarge as err:
                response = _json(413, {"error": str(err)})
            except Exception as err:  # the API stays up and the client gets a line, the log the traceback
                self.c.logger.exception("api %s %s failed", request.method, request.path)
                response = _json(500, {"error": f"internal error: {type(err).__name__}; see the controller log"})
        if request.method != "GET":
            self.c.logger.info("api %s %s -> %s", request.method, request.path, response.status)
        return response(environ, start_response)

    def status(self, request: Request) -> Response:
        names = self.c.plan.switch_names()
        return _json(
            200,
            {
                "ready": self.c.ready,
                "switches": {names[d]: d in self.c.installed for d in names},
                "mode": self.c.ocs.mode if self.c.fabric.has_ocs else "none",
                "steering": self.c.ocs.steering,
                "circuits": len(self.c.circuits),
                "reconfigurations": len(self.c.reconfig_events),
                "skipped_reconfigurations": self.c.skipped_reconfigurations,
            },
        )

    def get_circuits(self, request: Request) -> Response:
        return _json(200, {"circuits": configuration_as_list(self.c.circuits)})

    def put_circuits(self, request: Request) -> Response:
        if not self.c.fabric.has_ocs:
            return _json(409, {"error": f"this fabric has no OCS (variant {self.c.fabric.variant})"})
        if self.c.ocs.mode != "pinned":
            return _json(409, {"error": "circuits are set by the controller in periodic mode; post demand instead"})
        if not self.c.ready:
            return _json(503, {"error": "not every switch is connected yet"})
        config = parse_configuration(
            _body(request, "circuits", self.body_limit), self.c.fabric.racks, self.c.plan.ocs_ports_per_tor
        )
        event = self.c.reconfigure(config, reason="api")
        return _json(200, {"event": event.to_dict() if event else None})

    def get_events(self, request: Request) -> Response:
        return _json(200, {"events": [e.to_dict() for e in self.c.reconfig_events]})

    def get_demand(self, request: Request) -> Response:
        return _json(
            200, {"hints": self.c.demand_hints, "measured": self.c.measured_demand, "effective": self.c.demand()}
        )

    def put_demand(self, request: Request) -> Response:
        self.c.set_demand_hints(parse_demand(_body(request, "demand", self.body_limit), self.c.fabric.racks))
        return _json(200, {"hints": self.c.demand_hints})

    def get_ports(self, request: Request) -> Response:
        return _json(200, {"ports": self.c.port_counters()})
