"""One simulated run of a scenario under one policy, into a results directory like an emulated run's.

The directory gets the resolved scenario and environment.json first (`run_dir.py`), then jobs.csv, tasks.csv,
flows.csv (with each flow's path), ocs_events.csv, ocs_demand.csv, preemptions.csv, allocation.csv and links.csv (the ToRs' core
port counters, every simulated second) as the simulation goes (flushed at least every second of wall-clock
time), plan.csv, and summary.json at the end, also when the run fails. Times are simulated seconds.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

from hybridbed.config.scenario import Scenario
from hybridbed.controller.demand_log import DEMAND_FIELDS
from hybridbed.controller.events import OCS_EVENT_FIELDS
from hybridbed.experiments.run_dir import begin_run_dir
from hybridbed.experiments.run_failed import RunFailed
from hybridbed.results.progress import Progress
from hybridbed.results.records import (
    ACTION_FIELDS,
    FLOW_PATH_FIELDS,
    JOB_FIELDS,
    TASK_FIELDS,
    AllocationTimeline,
    CsvLog,
    LinkCounterLog,
    write_plan,
)
from hybridbed.results.summary import add_flow_totals, add_uplink_totals, read_flows, summarize, update_summary
from hybridbed.scheduler.core import PolicyError
from hybridbed.simulator.engine import ResultLogs, Simulation, SimulationTimeout
from hybridbed.simulator.fairshare import RateSolver
from hybridbed.testbed.interrupts import deferred_interrupts, stops_as_interrupts
from hybridbed.workloads.build import build_workload

FLUSH_INTERVAL_S = 1.0


def result_logs(out_dir: Path) -> ResultLogs:
    """The run's CSV files in `out_dir`, each flushed at least every FLUSH_INTERVAL_S of wall-clock time."""

    def log(name: str, fields: list[str]) -> CsvLog:
        return CsvLog(out_dir / name, fields, FLUSH_INTERVAL_S)

    return ResultLogs(
        jobs=log("jobs.csv", JOB_FIELDS),
        tasks=log("tasks.csv", TASK_FIELDS),
        flows=log("flows.csv", FLOW_PATH_FIELDS),
        ocs_events=log("ocs_events.csv", OCS_EVENT_FIELDS),
        ocs_demand=log("ocs_demand.csv", DEMAND_FIELDS),
        actions=log("preemptions.csv", ACTION_FIELDS),
        allocation=AllocationTimeline(out_dir / "allocation.csv"),
        links=LinkCounterLog(out_dir / "links.csv"),
    )


def run_simulation(
    scenario: Scenario,
    out_dir: Path,
    on_progress: Callable[[Progress], None] | None = None,
    rates: RateSolver | None = None,
) -> dict:
    """Simulate the scenario's workload under its policy; returns summary.json's content. Raises RunFailed.
    `rates` computes the max-min fair rates (bench/simulator.py compares the reference with the default)."""
    begin_run_dir(scenario, out_dir)
    specs = build_workload(scenario)
    logs = result_logs(out_dir)
    simulation = Simulation(scenario, logs, rates)
    status, started = "failed", time.perf_counter()
    error: str | None = None  # why a failed run failed, for its summary
    planning_s = 0.0
    try:
        with stops_as_interrupts():
            simulation.policy.plan(specs, simulation.cluster)
            planning_s = time.perf_counter() - started
            write_plan(out_dir, simulation.policy.plan_rows())
            simulation.run(specs, on_progress)
        status = "done"
    except (SimulationTimeout, PolicyError) as err:
        error = str(err)
        raise RunFailed(error) from err
    except KeyboardInterrupt:
        status = "interrupted"  # the results so far are written, marked as such
        raise
    except Exception as err:
        error = f"{type(err).__name__}: {err}"
        raise
    finally:
        with deferred_interrupts():  # a second Ctrl-C must not cut the results short
            logs.allocation.record(simulation.cluster.allocation(), simulation.now, final=True)
            simulation.record_links()
            logs.close()
            write_plan(out_dir, simulation.policy.plan_rows())  # again: per-job plans made as jobs arrived
            flows_csv = read_flows(out_dir)  # read once, for the summary and the totals
            summarize(out_dir, len(specs), status, flows=flows_csv)
            flows = simulation.flows
            add_uplink_totals(
                out_dir, round(flows.eps_uplink_bytes), round(flows.ocs_uplink_bytes), len(simulation.ocs.events)
            )
            add_flow_totals(out_dir, scenario.scaled_ocs().elephant_threshold_bytes, flows_csv)
            summary = update_summary(
                out_dir,
                {
                    "backend": "simulation",
                    "simulated_s": simulation.now,
                    "events": simulation.events,
                    "planning_wall_s": round(planning_s, 3),
                    "wall_s": round(time.perf_counter() - started, 3),
                    **simulation.elephant_wait_summary(),
                    **({"error": error} if error else {}),
                },
            )
    return summary
