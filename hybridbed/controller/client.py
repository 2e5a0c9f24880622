"""Client of the controller's REST API, for the testbed, the scheduler and tests.

It must be used from inside the run's fabric namespace, where the API listens on 127.0.0.1.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import requests

from hybridbed.controller.events import OcsEvent

DEFAULT_REST_PORT = 8080


class ControllerError(RuntimeError):
    """The controller refused a request; carries the HTTP status and the controller's message."""

    def __init__(self, status: int, message: str):
        super().__init__(f"controller answered {status}: {message}")
        self.status = status
        self.message = message


class FabricClient:
    def __init__(self, port: int = DEFAULT_REST_PORT, timeout: float = 30.0):
        self.base = f"http://127.0.0.1:{port}"
        self.timeout = timeout
        self.session = requests.Session()
        self.session.trust_env = False  # never send loopback requests through a proxy from the environment

    def _call(self, method: str, path: str, body: object | None = None, raw: bytes | None = None) -> dict:
        response = self.session.request(
            method,
            self.base + path,
            json=body,
            data=raw,
            timeout=self.timeout,
            headers={"Content-Type": "application/json"} if raw is not None else None,
        )
        try:
            payload = response.json()
        except ValueError:
            payload = {"error": response.text}
        if response.status_code != 200:
            raise ControllerError(response.status_code, payload.get("error", response.text))
        return payload

    def status(self) -> dict:
        return self._call("GET", "/status")

    def circuits(self) -> list[dict]:
        return self._call("GET", "/circuits")["circuits"]

    def set_circuits(self, circuits: list[dict]) -> OcsEvent | None:
        """Pin a configuration; returns the reconfiguration event once the circuits carry traffic."""
        event = self._call("PUT", "/circuits", {"circuits": circuits})["event"]
        return OcsEvent.from_dict(event) if event else None

    def events(self) -> list[OcsEvent]:
        return [OcsEvent.from_dict(e) for e in self._call("GET", "/events")["events"]]

    def demand(self) -> dict:
        return self._call("GET", "/demand")

    def set_demand(self, matrix: list[list[float]]) -> dict:
        return self._call("PUT", "/demand", {"demand": matrix})

    def ports(self) -> dict[str, dict[str, dict[str, int]]]:
        return self._call("GET", "/ports")["ports"]

    def put_raw(self, path: str, raw: bytes) -> dict:
        """Send an arbitrary body (e.g. malformed JSON) to a PUT endpoint."""
        return self._call("PUT", path, raw=raw)

    def wait_ready(self, timeout: float, alive: Callable[[], bool]) -> None:
        """Wait until every switch is connected and has its forwarding rules; `alive` says the process still runs."""
        deadline = time.monotonic() + timeout
        last_error = "no answer yet"
        while time.monotonic() < deadline:
            if not alive():
                raise RuntimeError("the controller process exited during start-up")
            try:
                status = self.status()
                if status["ready"]:
                    return
                waiting = [name for name, ok in status["switches"].items() if not ok]
                last_error = f"switches not ready: {', '.join(waiting)}"
            except requests.ConnectionError:
                last_error = "REST API not listening yet"
            time.sleep(0.1)
        raise TimeoutError(f"controller not ready after {timeout:.0f} s ({last_error})")
