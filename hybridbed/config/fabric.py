"""What a hybrid DCN looks like and how its OCS behaves: validated settings shared by every backend.

Validation happens here, before anything is created, so a bad value is reported once, by field name.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

# DSCP value a sender sets on traffic that may take a circuit in steering mode `marked`.
# AF11 is the RFC 4594 class for high-throughput bulk data.
DEFAULT_BULK_DSCP = 10
# Mininet's TCLink ignores (with only a log line) any rate above 1000 Mb/s, so emulation refuses larger values.
MAX_LINK_RATE_MBPS = 1000.0
# Every emulated switch port queues QUEUE_MS worth of full-size frames at its rate, at least MIN_QUEUE_PACKETS:
# about what a datacenter switch port buffers (testbed/shaping.py says why not the veth's 1000 packets).
QUEUE_MS = 10.0
MIN_QUEUE_PACKETS = 32
FRAME_BYTES = 1514
# The emulated hosts' TCP congestion control. The papers do not name one; their Hadoop clusters ran Linux, whose
# default has been CUBIC since 2.6.19. A new network namespace otherwise inherits the machine's default (BBR on
# some VMs), so results would depend on the machine the run happens on.
DEFAULT_TCP_CONGESTION_CONTROL = "cubic"


def queue_packets(rate_mbps: float) -> int:
    """The queue limit, in frames, of a switch port shaped to `rate_mbps`."""
    return max(MIN_QUEUE_PACKETS, int(rate_mbps * 1e6 / 8 * QUEUE_MS / 1000 / FRAME_BYTES))


class FabricSpec(BaseModel):
    """Racks, hosts and link rates. Rates are in Mb/s on the emulated links (already scaled); the
    simulator takes any rate, the emulation at most MAX_LINK_RATE_MBPS (`emulation_limits`).

    The defaults (hosts 10, OCS 20, EPS uplink 1/10 of a rack's host capacity) keep the JobPacker
    paper's 10:1 OCS:EPS ratio and stay under what the userspace OVS datapath of a 2-core machine
    forwards (docs/network.md, fidelity table).
    """

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    racks: int = Field(ge=2, le=250, description="number of racks (ToR switches)")
    hosts_per_rack: int = Field(ge=1, le=250, description="servers behind each ToR")
    host_rate_mbps: float = Field(default=10.0, gt=0, description="every host's NIC")
    eps_rate_mbps: float | None = Field(
        default=None, gt=0, description="ToR-to-EPS uplink rate; derived from oversubscription if unset"
    )
    oversubscription: float = Field(
        default=10.0,
        ge=1.0,
        le=1000.0,
        description="rack host capacity / EPS uplink rate, used when eps_rate_mbps is unset",
    )
    ocs_rate_mbps: float = Field(default=20.0, gt=0, description="every OCS port (a circuit's rate)")
    ocs_ports_per_tor: int = Field(default=1, ge=1, le=8, description="circuits a ToR can have at once")
    variant: Literal["hybrid", "f-eps", "eps"] = Field(
        default="hybrid", description="f-eps: no OCS, EPS uplinks at the OCS rate; eps: no OCS, EPS as configured"
    )
    tcp_congestion_control: str = Field(
        default=DEFAULT_TCP_CONGESTION_CONTROL,
        pattern=r"^[a-z0-9_]+$",
        description="emulation: the hosts' TCP congestion control, set on each host's route to the fabric (one the "
        "kernel has: /proc/sys/net/ipv4/tcp_available_congestion_control)",
    )
    userspace_tso: bool = Field(
        default=False,
        description="emulation, userspace datapath: Open vSwitch's userspace TSO with segmentation offloads on, "
        "for rates past the datapath's per-packet ceiling (docs/network.md); below 40 Mb/s it is less faithful",
    )

    def emulation_limits(self) -> list[str]:
        """Why this fabric cannot be emulated (one line per field), or nothing: a shaped link carries at
        most MAX_LINK_RATE_MBPS."""
        problems = [
            f"{name}: {value:g} Mb/s is above the {MAX_LINK_RATE_MBPS:g} Mb/s an emulated link can have "
            f"(the simulation backend takes any rate)"
            for name in ("host_rate_mbps", "eps_rate_mbps", "ocs_rate_mbps")
            if (value := getattr(self, name)) is not None and value > MAX_LINK_RATE_MBPS
        ]
        if not problems and self.eps_uplink_mbps > MAX_LINK_RATE_MBPS:
            problems.append(
                f"oversubscription: the EPS uplink rate works out to {self.eps_uplink_mbps:g} Mb/s (host_rate_mbps x "
                f"hosts_per_rack / oversubscription), above the {MAX_LINK_RATE_MBPS:g} Mb/s an emulated link can have"
            )
        return problems

    @property
    def has_ocs(self) -> bool:
        return self.variant == "hybrid"

    @property
    def eps_uplink_mbps(self) -> float:
        """The ToR-EPS rate actually configured, after the variant and oversubscription rules."""
        if self.variant == "f-eps":
            return self.ocs_rate_mbps
        if self.eps_rate_mbps is not None:
            return self.eps_rate_mbps
        return self.host_rate_mbps * self.hosts_per_rack / self.oversubscription


class OcsSpec(BaseModel):
    """How the controller runs the optical circuit switch and steers traffic onto it."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    mode: Literal["pinned", "periodic"] = Field(
        default="pinned",
        description="pinned: circuits set through the REST API; periodic: a matching of the demand every interval",
    )
    reconfig_interval_s: float = Field(
        default=1.0,
        gt=0.01,
        le=3600,
        description="periodic mode: seconds between reconfigurations (JobPacker §5.1.2: 1 s)",
    )
    reconfig_delay_ms: float = Field(
        default=10.0, ge=0, le=10_000, description="dark time of a reconfiguration (JobPacker §5.1.2: 10 ms)"
    )
    steering: Literal["all", "elephant", "marked"] = Field(
        default="all",
        description=(
            "all: a lit rack pair's traffic rides its circuit (Helios-style); elephant: only shuffle traffic of"
            " (job, source rack, destination rack) aggregates at or above the elephant threshold, which the"
            " workers mark with bulk_dscp (JobPacker §2.2); marked: only packets a sender marked with bulk_dscp"
        ),
    )

    elephants_wait: bool = Field(
        default=False,
        description=(
            "with steering elephant: an elephant's bytes go over a circuit only, waiting while their rack pair has"
            " none (JobPacker §2.2: the elephant matrix M_o is sent via the OCS, the rest via the EPS; Fig. 2 times"
            " M_o at the OCS's rate alone); false: they take the EPS until their circuit lights, as c-Through's"
            " hosts do. The simulation backend models it; the emulated ToRs send a dark pair's marked traffic over"
            " the EPS. Needs mode periodic, and not scheduler solstice, which leaves to the EPS what it does not"
            " schedule"
        ),
    )

    @model_validator(mode="after")
    def _elephants_can_wait(self) -> OcsSpec:
        if self.elephants_wait and self.steering != "elephant":
            raise ValueError(
                f"ocs.elephants_wait needs ocs.steering elephant (got {self.steering}): only marked elephants can wait"
            )
        if self.elephants_wait and self.mode != "periodic":
            raise ValueError(
                f"ocs.elephants_wait needs ocs.mode periodic (got {self.mode}): the simulator sets no pinned circuit, "
                "so elephants would wait for circuits that never come"
            )
        if self.elephants_wait and self.scheduler == "solstice":
            # Solstice trims, and drops from a full interval, what it leaves to the EPS. Under all-to-all demand every
            # entry falls below its shortest day and it lights nothing: the paper-scale Fair run then stalled
            # with 242 jobs left (docs/network.md, circuit schedulers).
            raise ValueError(
                "ocs.scheduler solstice leaves to the EPS the demand too short for a configuration of its own, and "
                "ocs.elephants_wait keeps elephants off the EPS: they would wait for circuits that never come "
                "(set ocs.elephants_wait false, or another scheduler)"
            )
        return self

    @property
    def steers_marked_only(self) -> bool:
        """Circuits carry only packets marked with bulk_dscp (the workers mark elephant shuffles)."""
        return self.steering != "all"

    bulk_dscp: int = Field(
        default=DEFAULT_BULK_DSCP, ge=1, le=63, description="the DSCP of bulk traffic (AF11, RFC 4594)"
    )
    demand_source: Literal["hints", "measured", "both"] = Field(
        default="both",
        description="what periodic mode matches on: the policy's hints, the measured rack-to-rack bytes, or both",
    )
    measured_demand: Literal["interval", "backlog"] = Field(
        default="interval",
        description=(
            "measured rack-pair demand: the bytes of the last interval, or (backlog) every byte since the pair"
            " last had an idle interval, so an aggregate too slow to cross the threshold in one interval"
            " crosses it over several (JobPacker §2.2 sizes elephants by aggregate, not by rate); with"
            " steering elephant or marked, only marked bytes count"
        ),
    )
    elephant_threshold_bytes: float = Field(
        default=0.0, ge=0, description="full scale; a rack pair's demand below it gets no circuit (JobPacker: 1.125 GB)"
    )
    skip_unchanged: bool = Field(
        default=True,
        description="periodic mode: no reconfiguration when the matching is unchanged (false: the circuits go "
        "dark for the delay and come back every interval, as an OCS that reconfigures whatever the matching)",
    )
    scheduler: Literal["edmonds", "greedy", "solstice", "rotor"] = Field(
        default="edmonds",
        description=(
            "periodic mode's circuit scheduler: edmonds (max-weight matching, JobPacker §5.1.2), greedy (heaviest"
            " pair first), solstice (several matchings per interval, Solstice CoNEXT'15; one OCS port per ToR),"
            " rotor (demand-oblivious round robin, RotorNet SIGCOMM'17)"
        ),
    )


def circuit_scheduler_problems(fabric: FabricSpec, ocs: OcsSpec) -> list[str]:
    """What the OCS settings ask of the fabric that it does not have."""
    if ocs.scheduler == "solstice" and fabric.ocs_ports_per_tor != 1:
        return [
            f"ocs.scheduler solstice schedules one OCS port per ToR (fabric.ocs_ports_per_tor is "
            f"{fabric.ocs_ports_per_tor})"
        ]
    return []
