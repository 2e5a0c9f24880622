"""Corral (Jalaparti et al., SIGCOMM'15) on the hybrid network: recurring jobs planned offline onto few
racks each, their input placed there and their tasks confined there; ad-hoc jobs run by Fair on
whatever the plan leaves free. The planner and its latency model are in `planning.corral`."""
from __future__ import annotations

from hybridbed.policies.planning.corral import plan_corral
from hybridbed.policies.planning.latency import JobProfile, LatencyModel
from hybridbed.policies.planning.timeline import Plan
from hybridbed.policies.planned import PlannedPolicy


class CorralPolicy(PlannedPolicy):
    name = "corral"
    summary = "Corral: offline plan puts each recurring job and its input on few racks; ad-hoc jobs by Fair"
    ocs_aware = False

    def __init__(self, patience: int = 20):
        if patience < 1:
            raise ValueError(f"patience must be at least 1, got {patience}")
        super().__init__()
        self.patience = patience

    def build_plan(self, jobs: list[JobProfile], model: LatencyModel) -> Plan:
        return plan_corral(jobs, model, self.patience)
