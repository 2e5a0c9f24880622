"""Entry point of the controller process: os-ken 4.x has no manager command, so apps start in-process."""

from __future__ import annotations

import argparse
import logging
import os


def main(argv: list[str] | None = None) -> None:
    # os-ken 4.x defaults to a native-thread hub, on which its ofctl service races the OpenFlow handshake
    # (it reads a datapath's id before the handler has set it) and exceptions end threads without a log.
    # The eventlet hub schedules handlers cooperatively, as Ryu always did.
    os.environ["OSKEN_HUB_TYPE"] = "eventlet"
    from os_ken.lib import hub

    hub.patch(thread=False)

    from os_ken import cfg
    from os_ken.base.app_manager import AppManager

    parser = argparse.ArgumentParser(description="hybridbed fabric controller (os-ken)")
    parser.add_argument("--fabric-spec", required=True)
    parser.add_argument("--ocs-spec", required=True)
    parser.add_argument("--of-port", type=int, required=True, help="OpenFlow listen port")
    parser.add_argument(
        "--of-host",
        default="127.0.0.1",
        help="OpenFlow listen address (0.0.0.0 where further servers' switches come in over the control tunnels)",
    )
    parser.add_argument("--rest-port", type=int, required=True, help="REST API port on 127.0.0.1")
    parser.add_argument("--event-log", default=None)
    parser.add_argument("--demand-log", default=None)
    args = parser.parse_args(argv)

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    logging.getLogger("os_ken.lib.hub").setLevel(logging.WARNING)  # one line per REST request otherwise
    cfg.CONF(args=[], project="os_ken")
    cfg.CONF.set_override("ofp_listen_host", args.of_host)
    cfg.CONF.set_override("ofp_tcp_listen_port", args.of_port)
    # registers the hybridbed option group
    import hybridbed.controller.fabric_app  # noqa: F401

    for name, value in (
        ("fabric_spec", args.fabric_spec),
        ("ocs_spec", args.ocs_spec),
        ("event_log", args.event_log),
        ("demand_log", args.demand_log),
        ("rest_port", args.rest_port),
    ):
        cfg.CONF.set_override(name, value, group="hybridbed")
    AppManager.run_apps(["hybridbed.controller.fabric_app", "os_ken.app.ofctl.service"])


if __name__ == "__main__":
    main()
