"""An Aalo-like task scheduler (Chowdhury and Stoica, SIGCOMM'15), DSP's makespan baseline (§V): a job is
a coflow and its tasks its flows. Jobs sit in priority queues by the service they have attained (D-CLAS:
queue k holds jobs with attained service in [Q·E^(k-1), Q·E^k), the last queue everything beyond), a
higher queue is served first (strict priority, as PIAS coordinates its queues), first in, first out within
a queue, so a job sinks as it receives service and short jobs finish first without knowing job sizes.
Service is the work handed out so far, in core-seconds: each started or finished task's cores times its
duration at its allotted rates (Aalo counts the bytes a coflow has sent; a task's work is granted when it
starts, and counting it then keeps a decision's cost to the job's stages, not its tasks).
No deadlines, no preemption; a job's runnable stages go breadth-first, the first task that fits the host's
cores and memory starts, as in the Tez baselines.
"""

from __future__ import annotations

import math

from pydantic import Field

from hybridbed.policies.dag_order import StageOrderPolicy
from hybridbed.scheduler.cluster import ClusterState
from hybridbed.scheduler.dag_paths import stage_levels
from hybridbed.scheduler.model import Job
from hybridbed.scheduler.policy import PolicyParams
from hybridbed.scheduler.transfers import expected_duration_s


class AaloParams(PolicyParams):
    # Aalo's D-CLAS queues (Chowdhury and Stoica, SIGCOMM'15): K = 10 queues, E = 10; its first queue
    # holds coflows below 10 MB, here translated into service in core-seconds (hybridbed's choice).
    queues: int = Field(default=10, ge=1, description="K, the number of priority queues")
    first_queue_core_s: float = Field(default=20.0, gt=0, description="Q, the service the first queue holds")
    multiplier: float = Field(default=10.0, gt=1, description="E, each queue's bound over the one before")


class AaloPolicy(StageOrderPolicy):
    name = "aalo"
    summary = "Aalo-like: jobs in priority queues by attained service (D-CLAS), FIFO within a queue"

    Params = AaloParams
    params: AaloParams

    def ranks(self, job: Job) -> list[float]:
        return [float(level) for level in stage_levels(job)]

    def attained_core_s(self, job: Job, cluster: ClusterState) -> float:
        pending = cluster.pending[job.job_id].stages
        served = 0.0
        for i, stage in enumerate(job.stages):
            started = len(stage.tasks) - (len(pending[i].tasks) if i in pending else 0)
            if started:
                served += started * stage.tasks[0].demand.cores * expected_duration_s(stage.tasks[0])
        return served

    def queue_of(self, job: Job, cluster: ClusterState) -> int:
        service = self.attained_core_s(job, cluster)
        p = self.params
        if service < p.first_queue_core_s:
            return 0
        return min(p.queues - 1, 1 + int(math.log(service / p.first_queue_core_s, p.multiplier)))

    def job_order(self, cluster: ClusterState) -> list[Job]:
        return sorted(
            cluster.launchable.values(), key=lambda j: (self.queue_of(j, cluster), j.spec.arrival_s, j.job_id)
        )
