"""DSP's preemption rules (Alg. 1, §IV-B), each on its own: which waiting task suspends which running one,
given the tasks' priorities, allowable and waited times (a stand-in for Eqs. 12-13, which
test_dsp.py checks)."""

from __future__ import annotations

import random
from dataclasses import dataclass, field

from hybridbed.policies.dsp import DspNoNormalisedRulePolicy, DspPolicy
from hybridbed.scheduler.cluster import ClusterState, HostState
from hybridbed.scheduler.core import SchedulerCore
from hybridbed.scheduler.model import Resources, StageSpec, Task, build_job, dag_spec

EPOCH_S, PERIOD_S = 2.0, 60.0  # DSP's defaults: ε = one epoch, τ = 0.05 periods = 3 s


@dataclass
class StandIn:
    """Priorities, allowable and waited times as the test sets them; every task not named can wait long,
    has waited nothing and has priority 0."""

    cluster: ClusterState
    priority: dict[str, float] = field(default_factory=dict)
    allowable: dict[str, float] = field(default_factory=dict)
    waited: dict[str, float] = field(default_factory=dict)
    gap: float = 1.0

    def of(self, task: Task) -> float:
        return self.priority.get(task.task_id, 0.0)

    def allowable_s(self, task: Task) -> float:
        return self.allowable.get(task.task_id, 100.0)

    def waited_s(self, task: Task) -> float:
        return self.waited.get(task.task_id, 0.0)

    def mean_gap(self) -> float:
        return self.gap


def setting(policy: DspPolicy):
    """Three jobs known to the policy: `chain` (stage a, then b after it) and two one-stage jobs."""
    cluster = ClusterState(1, {"h": HostState("h", 0, 8, Resources(8, 8192))}, 1.0)
    core = SchedulerCore(policy, cluster, random.Random(1))
    specs = [
        dag_spec("chain", 0.0, (StageSpec("a", 2, 10.0, ()), StageSpec("b", 2, 10.0, (0,)))),
        dag_spec("x", 0.0, (StageSpec("a", 3, 10.0, ()),)),
        dag_spec("y", 0.0, (StageSpec("a", 3, 10.0, ()),)),
    ]
    jobs = {}
    for spec in specs:
        jobs[spec.job_id] = build_job(spec, Resources(1, 256))
        core.submit(jobs[spec.job_id], 0.0)
    return cluster, {
        f"{j}-{s}{i}": t
        for j, job in jobs.items()
        for s, stage in enumerate(job.stages)
        for i, t in enumerate(stage.tasks)
    }


def pairs(policy: DspPolicy, waiting: list[Task], victims: list[Task], stand_in: StandIn) -> list[tuple[str, str]]:
    return [(w.task_id, v.task_id) for w, v in policy._choose(waiting, victims, stand_in)]


def test_an_urgent_task_suspends_the_lowest_priority_task_it_does_not_depend_on():
    policy = DspPolicy()
    cluster, t = setting(policy)
    urgent, parent, other = t["chain-11"], t["chain-00"], t["x-00"]  # urgent is in stage b, after parent's a
    stand_in = StandIn(cluster, allowable={urgent.task_id: EPOCH_S})  # t_a <= ε
    assert pairs(policy, [urgent], [parent, other], stand_in) == [(urgent.task_id, other.task_id)]  # C2
    assert pairs(policy, [urgent], [parent], stand_in) == []  # only its own parent runs: it waits
    stand_in.allowable[urgent.task_id] = EPOCH_S + 0.1  # not urgent: no preemption by this rule
    assert pairs(policy, [urgent], [other], stand_in) == []


def test_a_task_that_waited_tau_suspends_one_whatever_the_priorities():
    policy = DspPolicy(period_s=PERIOD_S, tau_periods=0.05)
    cluster, t = setting(policy)
    waiting, victim = t["y-00"], t["x-00"]
    stand_in = StandIn(cluster, priority={waiting.task_id: 0.0, victim.task_id: 9.0})
    stand_in.waited[waiting.task_id] = 2.9
    assert pairs(policy, [waiting], [victim], stand_in) == []
    stand_in.waited[waiting.task_id] = 3.0  # τ = 0.05 x 60 s
    assert pairs(policy, [waiting], [victim], stand_in) == [(waiting.task_id, victim.task_id)]


def test_the_normalised_rule_needs_a_priority_difference_over_rho_mean_gaps():
    cluster, t = setting(DspPolicy())
    waiting, low, high = t["y-00"], t["x-00"], t["x-01"]
    for difference, suspends in ((2.5, True), (1.5, False), (-1.0, False)):
        policy = DspPolicy(rho=2.0)
        setting(policy)  # the policy learns the jobs (for condition C2)
        stand_in = StandIn(
            cluster, priority={waiting.task_id: 10.0, low.task_id: 10.0 - difference, high.task_id: 20.0}
        )
        expected = [(waiting.task_id, low.task_id)] if suspends else []
        assert pairs(policy, [waiting], [low, high], stand_in) == expected, difference
    # DSPW/oPP: any positive difference will do
    nopp = DspNoNormalisedRulePolicy()
    setting(nopp)
    stand_in = StandIn(cluster, priority={waiting.task_id: 10.0, low.task_id: 8.5})
    assert pairs(nopp, [waiting], [low], stand_in) == [(waiting.task_id, low.task_id)]


def test_only_the_first_delta_of_the_waiting_tasks_preempt_by_priority():
    policy = DspPolicy(delta=0.35)
    cluster, t = setting(policy)
    waiting = [t["y-00"], t["y-01"], t["y-02"]]  # ⌈0.35 x 3⌉ = 2 of them may preempt
    victims = [t["x-00"], t["x-01"], t["x-02"]]
    stand_in = StandIn(cluster, priority={w.task_id: 50.0 for w in waiting})
    assert pairs(policy, waiting, victims, stand_in) == [
        (waiting[0].task_id, victims[0].task_id),
        (waiting[1].task_id, victims[1].task_id),
    ]


def test_a_running_task_that_cannot_wait_an_epoch_is_not_preemptable():
    policy = DspPolicy(epoch_s=EPOCH_S)
    cluster, t = setting(policy)
    task = t["x-00"]
    assert policy._preemptable(task, StandIn(cluster, allowable={task.task_id: EPOCH_S + 0.1}))
    assert not policy._preemptable(task, StandIn(cluster, allowable={task.task_id: EPOCH_S}))
