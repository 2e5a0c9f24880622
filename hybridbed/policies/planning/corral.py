"""Corral's offline planner (Jalaparti et al., SIGCOMM'15): how many racks each recurring job gets, and
which racks, so that jobs run isolated on few racks and keep their shuffle inside them.

- Prioritisation: list-schedule the jobs, widest first (ties: longest predicted latency first; in
  the online case, by predicted arrival first), each on the r_j racks that can start its per-rack
  share of tasks soonest; maps and reduces share those racks.
- Provisioning: start every job on one rack; repeatedly give one more rack to the job with the longest
  predicted latency, re-run prioritisation, and keep the best plan (makespan for a batch, mean
  completion time online). Corral grows until every job spans the cluster; hybridbed also stops after
  `patience` rounds without improvement (a policy parameter), which bounds planning time at the
  papers' 1000-job scale.
- The latency model is OCS-unaware: Corral plans for a packet-switched core, so cross-rack shuffle
  is priced at the EPS uplink rate.
"""

from __future__ import annotations

from hybridbed.policies.planning.latency import JobProfile, LatencyModel, is_batch
from hybridbed.policies.planning.timeline import JobPlan, Plan, Timeline
from hybridbed.scheduler.model import StageKind


def prioritise(
    jobs: list[JobProfile], racks_of: dict[str, int], model: LatencyModel, batch: bool, bookings: bool = True
) -> Plan:
    """One list schedule for a given number of racks per job; without its `bookings` (and so without the racks'
    sequences), the jobs' placements only: what provisioning compares."""

    def key(job: JobProfile) -> tuple:
        r = racks_of[job.job_id]
        width_first = (-r, -model.latency(job, r, r), job.job_id)
        return width_first if batch else (job.arrival_s, *width_first)

    timeline = Timeline(model.racks, model.containers_per_rack)
    timeline.records = bookings
    plan = Plan()
    for job in sorted(jobs, key=key):
        r = racks_of[job.job_id]
        per_rack = -(-max(job.n_maps, job.n_reduces) // r)
        chosen = timeline.earliest_racks(r, per_rack, job.arrival_s)
        maps = timeline.book(job.job_id, StageKind.MAP, chosen, job.n_maps, job.map_s, job.arrival_s)
        reduces = None
        if job.n_reduces:
            shuffle_done = maps.end_s + model.shuffle_latency(job, r, r)
            reduces = timeline.book(job.job_id, StageKind.REDUCE, chosen, job.n_reduces, job.reduce_s, shuffle_done)
        plan.add(JobPlan(job.job_id, maps, reduces))
    if bookings:
        plan.finish(timeline)
    return plan


def plan_corral(jobs: list[JobProfile], model: LatencyModel, patience: int = 20) -> Plan:
    if model.ocs_aware:
        raise ValueError("Corral plans with an OCS-unaware latency model")
    batch = is_batch(jobs)
    arrivals = {j.job_id: j.arrival_s for j in jobs}

    def objective(plan: Plan) -> float:
        return plan.makespan_s if batch else plan.mean_completion_s(arrivals)

    racks_of = {j.job_id: 1 for j in jobs}
    # the rounds compare placements only: the best one's bookings are made once, at the end (booking every
    # task of every round took a third of the planning)
    best_racks = dict(racks_of)
    best_value, stale = objective(prioritise(jobs, racks_of, model, batch, bookings=False)), 0
    while stale < patience:
        growable = [j for j in jobs if racks_of[j.job_id] < model.racks]
        if not growable:
            break
        longest = max(growable, key=lambda j: (model.latency(j, racks_of[j.job_id], racks_of[j.job_id]), j.job_id))
        racks_of[longest.job_id] += 1
        value = objective(prioritise(jobs, racks_of, model, batch, bookings=False))
        if value < best_value - 1e-9:
            best_racks, best_value, stale = dict(racks_of), value, 0
        else:
            stale += 1
    return prioritise(jobs, best_racks, model, batch)
