"""Dominant Resource Fairness (Ghodsi et al., NSDI'11) as YARN's Fair Scheduler runs it with the DRF
policy: the job with the lowest dominant share of cores and memory is offered the free resources
first, with Fair's delay scheduling for maps. Like YARN it allocates only cores and memory: disk and
network bandwidth are whatever the tasks get when they run (the Tetris paper's DRF baseline).
"""

from __future__ import annotations

from hybridbed.policies.fair import FairPolicy
from hybridbed.scheduler.cluster import ClusterState
from hybridbed.scheduler.model import Job


class DrfPolicy(FairPolicy):
    name = "drf"
    summary = "DRF over cores and memory (YARN Fair with the DRF policy), delay scheduling for maps"

    def share(self, job: Job, cluster: ClusterState) -> float:
        return cluster.dominant_share(job)
