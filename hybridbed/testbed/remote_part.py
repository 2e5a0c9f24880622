"""A run's part on a further server, started there by the first server over ssh:

    python -m hybridbed.testbed.remote_part

It reads its configuration as one JSON line on stdin, builds the server's share of the run (`ServerRun`: manifest,
watchdog, cgroup, fabric namespace with the tunnel ends, private Open vSwitch) and answers with one JSON line
naming what the first server's Mininet needs there. Then it serves requests, one JSON line each way, until it is
asked to stop or its stdin closes (the ssh connection is gone), and removes everything it built. Should it be
killed outright, the watchdog removes the run instead.
"""

from __future__ import annotations

import json
import signal
import sys
from typing import TextIO

from hybridbed.config.fabric import FabricSpec
from hybridbed.testbed.fidelity_monitor import FidelityMonitor
from hybridbed.testbed.server_run import ServerRun
from hybridbed.testbed.tunnels import VXLAN_OVERHEAD, TunnelEnd, underlay


class StopRequested(Exception):
    """SIGTERM or SIGHUP: tear down as if asked to stop."""


def _raise_stop(signum: int, frame: object) -> None:
    raise StopRequested(signal.Signals(signum).name)


def _reply(out: TextIO, message: dict) -> None:
    out.write(json.dumps(message) + "\n")
    out.flush()


def serve(config: dict, requests: TextIO, out: TextIO) -> None:
    """Build the server's share of the run from `config`, serve `requests` and tear it all down."""
    run = ServerRun(config["userspace_tso"], config["run_id"])
    status = "failed"
    try:
        tunnels = [TunnelEnd(**end) for end in config["tunnels"]]
        mtu = config["tunnel_mtu"]
        for peer in {end.remote_ip for end in tunnels}:
            _, underlay_mtu = underlay(peer)
            if underlay_mtu - VXLAN_OVERHEAD < mtu:
                raise RuntimeError(
                    f"this server's link towards {peer} has MTU {underlay_mtu}: too small for tunnels of MTU {mtu}"
                )
        run.isolate()
        run.start(tunnels, mtu)
        assert run.cgroup is not None and run.namespace is not None
        _reply(
            out,
            {
                "ok": True,
                "run_id": run.run_id,
                "state_dir": str(run.record.state_dir),
                "netns": run.namespace.name,
                "cgroup": str(run.cgroup.path),
                "ovs_env": run.ovs_environment(),
            },
        )
        monitor: FidelityMonitor | None = None
        for line in requests:
            request = json.loads(line)
            op = request["op"]
            if op == "stop":
                status = "stopped"
                break
            if op == "size_send_buffer":
                run.size_send_buffer(request["bridge"], request["port"], request["host_mac"], request["bytes"])
                _reply(out, {"ok": True})
            elif op == "task_cgroups":
                _reply(out, {"ok": True, **run.create_task_cgroups()})
            elif op == "relay":  # a Unix socket here for a TCP service on the first server's control tunnel
                path = run.record.state_dir / request["name"]
                run.relay(f"UNIX-LISTEN:{path}", f"TCP:{request['target']}", f"relay to {request['target']}")
                _reply(out, {"ok": True, "path": str(path)})
            elif op == "monitor_start":
                assert run.ovs is not None
                monitor = FidelityMonitor(
                    FabricSpec.model_validate(request["fabric"]),
                    run.record.state_dir / "fidelity.csv",
                    request["host_pids"],
                    run.ovs.vswitchd_pid if request["watch_forwarding"] else None,
                )
                monitor.start(request["origin_unix"])
                _reply(out, {"ok": True})
            elif op == "monitor_stop" and monitor is None:
                _reply(out, {"ok": False, "error": "no fidelity monitor was started here"})
            elif op == "monitor_stop":
                assert monitor is not None
                monitor.stop()
                samples = (run.record.state_dir / "fidelity.csv").read_text()
                _reply(
                    out, {"ok": True, "samples": samples, "tcp": monitor.tcp, "cpu_share": monitor.cpu_share_of_a_core}
                )
            else:
                _reply(out, {"ok": False, "error": f"unknown request {op!r}"})
        else:
            status = "connection lost"
    except StopRequested as err:
        status = f"stopped by {err}"
    except Exception as err:
        _reply(out, {"ok": False, "error": f"{type(err).__name__}: {err}"})
    finally:
        run.stop(status)


def main() -> int:
    for signum in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, _raise_stop)
    config = json.loads(sys.stdin.readline())
    serve(config, sys.stdin, sys.stdout)
    return 0


if __name__ == "__main__":
    sys.exit(main())
