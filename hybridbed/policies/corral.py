"""Corral (Jalaparti et al., SIGCOMM'15) on the hybrid network: recurring jobs planned offline onto few
racks each, their input placed there and their tasks confined there; ad-hoc jobs run by Fair on
whatever the plan leaves free. The planner and its latency model are in `planning.corral`."""

from __future__ import annotations

from pydantic import Field

from hybridbed.policies.planned import PlannedParams, PlannedPolicy
from hybridbed.policies.planning.corral import plan_corral
from hybridbed.policies.planning.latency import JobProfile, LatencyModel
from hybridbed.policies.planning.timeline import Plan


class CorralParams(PlannedParams):
    patience: int = Field(
        default=20,
        ge=1,
        description="the planner stops after this many rounds of growing jobs "
        "without a better plan (hybridbed's bound on planning time; Corral grows until every job "
        "spans the cluster)",
    )


class CorralPolicy(PlannedPolicy):
    name = "corral"
    summary = "Corral: offline plan puts each recurring job and its input on few racks; ad-hoc jobs by Fair"
    ocs_aware = False

    Params = CorralParams
    params: CorralParams

    def build_plan(self, jobs: list[JobProfile], model: LatencyModel) -> Plan:
        return plan_corral(jobs, model, self.params.patience)
