"""The os-ken application that runs a hybrid DCN: proactive forwarding, ToR steering and OCS circuits.

What each switch holds is computed by `rules.py` from the static FabricPlan and the lit circuits; this
app sends those entries when a switch connects and as circuits change, measures demand, and serves the
REST API.

Reconfiguration keeps traffic flowing: affected rack pairs go back to the EPS first, the changed
circuits go dark for the configured delay, then the new circuits are lit and traffic steered onto them.
Every step waits for an OpenFlow barrier, so the logged times are when the switches had the rules.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from os_ken import cfg
from os_ken.app.ofctl import api as ofctl_api
from os_ken.base import app_manager
from os_ken.controller import ofp_event
from os_ken.controller.handler import DEAD_DISPATCHER, MAIN_DISPATCHER, set_ev_cls
from os_ken.lib import hub
from os_ken.ofproto import ofproto_v1_3

from hybridbed.config.addressing import OCS_DPID, FabricPlan
from hybridbed.config.fabric import FabricSpec, OcsSpec
from hybridbed.controller.circuit_schedulers import circuit_scheduler
from hybridbed.controller.circuits import (
    Configuration,
    CounterReadings,
    MeasuredDemand,
    circuit_moves,
    combined_demand,
    configuration_as_list,
    parse_configuration,
)
from hybridbed.controller.demand_log import append_demand_log, demand_rows
from hybridbed.controller.events import OcsEvent, read_event_log
from hybridbed.controller.rest_api import FabricRestApi
from hybridbed.controller.rules import (
    COOKIE_RACK_MASK,
    FlowEntry,
    circuit_entry,
    demand_cookies,
    steering_entry,
    switch_entries,
)

CONF = cfg.CONF
CONF.register_opts(
    [
        cfg.StrOpt("fabric_spec", help="JSON file with the FabricSpec"),
        cfg.StrOpt("ocs_spec", help="JSON file with the OcsSpec"),
        cfg.StrOpt("event_log", help="JSON-lines file that receives every reconfiguration event"),
        cfg.StrOpt("demand_log", help="JSON-lines file that receives the demand of every periodic reconfiguration"),
        cfg.IntOpt("rest_port", help="REST API port on 127.0.0.1"),
    ],
    group="hybridbed",
)


# The hub's sleeps wait in whole milliseconds (epoll), up to one too long: a reconfiguration's wait sleeps
# until this much before its end and yields to other green threads for the rest.
SLEEP_SPIN_S = 0.002


def _sleep_until(deadline: float) -> None:
    """Return at `deadline` (unix time), not up to a millisecond after it."""
    remaining = deadline - time.time()
    if remaining > SLEEP_SPIN_S:
        hub.sleep(remaining - SLEEP_SPIN_S)
    while time.time() < deadline:
        hub.sleep(0)


class HybridFabricController(app_manager.OSKenApp):
    OFP_VERSIONS = [ofproto_v1_3.OFP_VERSION]

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        opts = CONF.hybridbed
        self.fabric = FabricSpec.model_validate_json(Path(opts.fabric_spec).read_text())
        self.ocs = OcsSpec.model_validate_json(Path(opts.ocs_spec).read_text())
        self.plan = FabricPlan(self.fabric)
        self.event_log = Path(opts.event_log) if opts.event_log else None
        self.demand_log = Path(opts.demand_log) if opts.demand_log else None
        self.datapaths: dict[int, Any] = {}  # os-ken Datapath objects
        self.installed: set[int] = set()
        # A restarted controller takes up where the last one left: its events (numbering goes on) and the
        # circuits the last of them set, which every (re)connecting switch is given in place of its tables.
        self.reconfig_events: list[OcsEvent] = read_event_log(self.event_log) if self.event_log else []
        self.circuits: Configuration = frozenset()
        if self.reconfig_events:
            last = self.reconfig_events[-1]
            self.circuits = parse_configuration(last.circuits_after, self.fabric.racks, self.plan.ocs_ports_per_tor)
            self.logger.info(
                "restarted: %d earlier reconfigurations in %s; restoring %d circuits",
                len(self.reconfig_events),
                self.event_log,
                len(self.circuits),
            )
        self.skipped_reconfigurations = 0
        self.circuit_scheduler = circuit_scheduler(self.fabric, self.ocs)
        racks = self.fabric.racks
        self.demand_hints = [[0.0] * racks for _ in range(racks)]
        self._measured = MeasuredDemand(racks, self.ocs.measured_demand)
        self.measured_demand = self._measured.matrix
        self.sent_bytes = [[0.0] * racks for _ in range(racks)]  # by the marked flows since the last poll
        self._counters = CounterReadings()
        self._reconfig_lock = hub.BoundedSemaphore(1)
        self._rest = hub.WSGIServer(("127.0.0.1", opts.rest_port), FabricRestApi(self))
        self.threads.append(hub.spawn(self._rest.serve_forever))
        if self.fabric.has_ocs and self.ocs.mode == "periodic":
            self.threads.append(hub.spawn(self._periodic_loop))

    # switch connection -------------------------------------------------------------------------
    @set_ev_cls(ofp_event.EventOFPStateChange, [MAIN_DISPATCHER, DEAD_DISPATCHER])
    def _state_change(self, ev) -> None:
        dp = ev.datapath
        if ev.state == MAIN_DISPATCHER:
            if dp.id not in self.plan.switch_names():
                self.logger.warning("ignoring unknown datapath %#x", dp.id)
                return
            self.datapaths[dp.id] = dp
            hub.spawn(self._install_base_flows, dp)
        elif dp.id in self.datapaths and self.datapaths[dp.id] is dp:
            del self.datapaths[dp.id]
            self.installed.discard(dp.id)

    def _install_base_flows(self, dp) -> None:
        for _ in range(50):  # the ofctl service learns of the switch in the same event round
            try:
                self._barrier(dp)
                break
            except Exception:  # InvalidDatapath until the service has registered it
                hub.sleep(0.02)
        self._delete_all_flows(dp)
        for entry in switch_entries(self.plan, self.ocs, dp.id, self.circuits):
            self._send(dp, entry)
        self._barrier(dp)
        self.installed.add(dp.id)
        self.logger.info("switch %s ready", self.plan.switch_names()[dp.id])

    @property
    def ready(self) -> bool:
        return set(self.plan.switch_names()) <= self.installed

    # flow entries ------------------------------------------------------------------------------
    def _send(self, dp, entry: FlowEntry, delete: bool = False) -> None:
        """Add the entry to the switch, or delete it (strictly: same priority and match)."""
        dp.send_msg(self._flow_mod(dp, entry, delete))

    @staticmethod
    def _flow_mod(dp, entry: FlowEntry, delete: bool = False):
        ofp, parser = dp.ofproto, dp.ofproto_parser
        match = parser.OFPMatch(**entry.match_fields())
        if delete:
            msg = parser.OFPFlowMod(
                dp,
                command=ofp.OFPFC_DELETE_STRICT,
                priority=entry.priority,
                match=match,
                out_port=ofp.OFPP_ANY,
                out_group=ofp.OFPG_ANY,
            )
        else:
            actions = [parser.OFPActionOutput(entry.out_port)]
            inst = [parser.OFPInstructionActions(ofp.OFPIT_APPLY_ACTIONS, actions)]
            msg = parser.OFPFlowMod(dp, cookie=entry.cookie, priority=entry.priority, match=match, instructions=inst)
        return msg

    def _delete_all_flows(self, dp) -> None:
        ofp, parser = dp.ofproto, dp.ofproto_parser
        dp.send_msg(
            parser.OFPFlowMod(
                dp, command=ofp.OFPFC_DELETE, table_id=ofp.OFPTT_ALL, out_port=ofp.OFPP_ANY, out_group=ofp.OFPG_ANY
            )
        )

    def _barrier(self, dp) -> None:
        ofctl_api.send_msg(self, dp.ofproto_parser.OFPBarrierRequest(dp), reply_cls=dp.ofproto_parser.OFPBarrierReply)

    # reconfiguration ---------------------------------------------------------------------------
    def reconfigure(
        self, target: Configuration, reason: str, requested: float | None = None, relight: bool = False
    ) -> OcsEvent | None:
        """Move from the current circuits to `target`; return the logged event (None if nothing changed).
        `requested`: when the decision's input was taken (periodic mode: the demand sample), else now.
        `relight`: every circuit goes dark and comes back, those `target` keeps too (`circuit_moves`)."""
        with self._reconfig_lock:
            before = self.circuits
            removed, added, unsteer, steer = circuit_moves(before, target, relight)
            if not removed and not added:
                return None
            requested = time.time() if requested is None else requested
            # The dark time runs from the moment the ToRs are told to move the affected pairs off their circuits
            # to the moment they are told to steer onto the new ones: both take a switch the same time to apply,
            # so the pairs are off circuits for the configured delay. (Counted from the unsteer barrier's
            # reply, it would also hold the reply's way back, which the switch had already acted on.)
            darkens = [
                (dp, self._flow_mod(dp, steering_entry(self.plan, self.ocs, a, b, port), delete=True))
                for (a, b), port in unsteer.items()
                if (dp := self.datapaths.get(self.plan.tor_dpid(a))) is not None
            ]
            dark_from = time.time()
            for dp, flow_mod in darkens:
                dp.send_msg(flow_mod)
            # no packet of a pair may reach the OCS once its circuit is rewired: the ToRs confirm first
            self._barriers({self.plan.tor_dpid(a) for a, _ in unsteer} & set(self.datapaths))
            ocs = self.datapaths[OCS_DPID]
            for circuit in removed:
                self._send(ocs, circuit_entry(self.plan, circuit), delete=True)
            self._barrier(ocs)
            self.circuits = target  # from here on a (re)connecting switch gets the new configuration
            # The new circuits and the steering onto them go out together once the delay is over, built before
            # it as the unsteering was, so that only sending is timed. (A circuit set up early would carry what
            # a ToR's datapath still sends by a cached flow the unsteering has not yet reached: to the wrong rack.)
            lights = [(ocs, self._flow_mod(ocs, circuit_entry(self.plan, circuit))) for circuit in added] + [
                (dp, self._flow_mod(dp, steering_entry(self.plan, self.ocs, a, b, port)))
                for (a, b), port in steer.items()
                if (dp := self.datapaths.get(self.plan.tor_dpid(a))) is not None
            ]
            if added:
                _sleep_until(dark_from + self.ocs.reconfig_delay_ms / 1000.0)
            for dp, flow_mod in lights:
                dp.send_msg(flow_mod)
            self._barriers({dp.id for dp, _ in lights})
            dark_until = done = time.time()
            event = OcsEvent(
                len(self.reconfig_events),
                reason,
                requested,
                dark_from,
                dark_until,
                done,
                self.ocs.reconfig_delay_ms,
                configuration_as_list(before),
                configuration_as_list(target),
            )
            self.reconfig_events.append(event)
            if self.event_log:
                with self.event_log.open("a") as log:
                    log.write(json.dumps(event.to_dict()) + "\n")
            return event

    def _barriers(self, dpids: set[int]) -> None:
        waits = [hub.spawn(self._barrier, self.datapaths[dpid]) for dpid in dpids]
        hub.joinall(waits)

    # demand ------------------------------------------------------------------------------------
    def set_demand_hints(self, matrix: list[list[float]]) -> None:
        self.demand_hints = matrix

    def demand(self) -> list[list[float]]:
        """The rack-to-rack demand the periodic mode matches on, per the configured demand source."""
        return combined_demand(self.demand_hints, self.measured_demand, self.ocs.demand_source)

    def _measure_demand(self) -> None:
        """Bytes each ToR sent towards each other rack since the last poll, from its per-rack flow counters."""
        racks = self.fabric.racks
        measured = [[0.0] * racks for _ in range(racks)]
        for a in range(racks):
            dp = self.datapaths.get(self.plan.tor_dpid(a))
            if dp is None:
                continue
            parser = dp.ofproto_parser
            replies = ofctl_api.send_msg(
                self, parser.OFPFlowStatsRequest(dp), reply_cls=parser.OFPFlowStatsReply, reply_multi=True
            )
            for reply in replies:
                for stat in reply.body:
                    if not stat.cookie & demand_cookies(self.ocs):
                        continue
                    age_s = stat.duration_sec + stat.duration_nsec / 1e9
                    delta = self._counters.delta((dp.id, stat.cookie), stat.byte_count, age_s)
                    measured[a][stat.cookie & COOKIE_RACK_MASK] += delta
        self.sent_bytes = measured
        self.measured_demand = self._measured.update(measured)

    def _periodic_loop(self) -> None:
        """Every interval: sample the demand, let the circuit scheduler plan the interval, and set up each of its
        slots at its offset (a slot due after the interval's end is dropped for the next interval's plan)."""
        interval = self.ocs.reconfig_interval_s
        next_tick = time.monotonic() + interval
        while True:
            hub.sleep(max(0.0, next_tick - time.monotonic()))
            started, next_tick = next_tick, next_tick + interval
            if not self.ready:
                continue
            try:
                sampled = time.time()  # the control lag counts from the demand sample
                if self.ocs.demand_source in ("measured", "both"):
                    self._measure_demand()
                demand = self.demand()
                self._log_demand(sampled, demand)
                for slot in self.circuit_scheduler.schedule(demand, self.circuits):
                    if slot.offset_s > 0:
                        if started + slot.offset_s >= next_tick:
                            break
                        hub.sleep(max(0.0, started + slot.offset_s - time.monotonic()))
                    unchanged = slot.configuration == self.circuits
                    if unchanged and self.ocs.skip_unchanged:
                        self.skipped_reconfigurations += 1
                        continue
                    # a later slot is asked for at its offset: the control lag counts from then
                    self.reconfigure(
                        slot.configuration, reason="periodic", requested=sampled + slot.offset_s, relight=unchanged
                    )
            except Exception:
                self.logger.exception("periodic reconfiguration failed; retrying next interval")

    def _log_demand(self, sampled: float, demand: list[list[float]]) -> None:
        if self.demand_log:
            rows = demand_rows(
                sampled,
                self.sent_bytes,
                self.measured_demand,
                self.demand_hints,
                demand,
                self.circuits,
                self.circuit_scheduler.threshold_bytes,
            )
            append_demand_log(self.demand_log, rows)

    # counters ----------------------------------------------------------------------------------
    def port_counters(self) -> dict[str, dict[int, dict[str, int]]]:
        names = self.plan.switch_names()
        counters: dict[str, dict[int, dict[str, int]]] = {}
        for dpid, dp in sorted(self.datapaths.items()):
            parser, ofp = dp.ofproto_parser, dp.ofproto
            replies = ofctl_api.send_msg(
                self,
                parser.OFPPortStatsRequest(dp, 0, ofp.OFPP_ANY),
                reply_cls=parser.OFPPortStatsReply,
                reply_multi=True,
            )
            ports = {}
            for reply in replies:
                for stat in reply.body:
                    if stat.port_no <= ofp.OFPP_MAX:
                        ports[stat.port_no] = {
                            "rx_bytes": stat.rx_bytes,
                            "tx_bytes": stat.tx_bytes,
                            "rx_packets": stat.rx_packets,
                            "tx_packets": stat.tx_packets,
                        }
            counters[names[dpid]] = ports
        return counters
