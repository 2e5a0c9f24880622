"""Small DSP, MR-POTS and DAG scenarios that the unit tests simulate and the integration tests emulate: a few
hosts kept busy enough that DSP preempts and MR-POTS shares, or roomy enough that a DAG's stages overlap."""

from __future__ import annotations

from hybridbed.config.scenario import Scenario


def _four_hosts(
    name: str, backend: str, seed: int, workers: dict, workload: dict, scheduler: dict, max_duration_s: float
) -> Scenario:
    """Two racks of two 10 Mb/s hosts behind a plain EPS, scaled to 1/100."""
    return Scenario.model_validate(
        {
            "name": name,
            "backend": backend,
            "seed": seed,
            "scale": 0.01,
            "fabric": {"racks": 2, "hosts_per_rack": 2, "host_rate_mbps": 10, "variant": "eps"},
            "workers": workers,
            "workload": workload,
            "scheduler": scheduler,
            "max_duration_s": max_duration_s,
        }
    )


def small_dsp(policy: str, backend: str = "simulation") -> Scenario:
    """8 TPC-H-like DAG jobs with tight deadlines (1.2-2x their critical paths) on 4 hosts of 4 cores."""
    return _four_hosts(
        f"dsp-small-{policy}",
        backend,
        seed=3,
        workers={
            "slots_per_host": 8,
            "cores_per_host": 4,
            "memory_mb_per_host": 16000,
            "container": {"cores": 1, "memory_mb": 1000},
            "resume_overhead_s": 0.5,
        },
        workload={
            "source": "dag",
            "jobs": 8,
            "arrival_window_s": 60,
            "deadline_slack": [1.2, 2.0],
            "dag": {"benchmark": "tpch", "templates": 4, "fact_tasks": 6, "reduce_input_mb": 16, "max_tasks": 6},
            "suite": {"block_mb": 16, "cpu_heavy_cores": 2, "cpu_heavy_s": 6, "io_heavy_s": 2, "memory_gb": [1, 2]},
        },
        scheduler={"policy": policy, "policy_params": {"dsp": {"milp_time_limit_s": 0.5}}},
        max_duration_s=900,
    )


def small_mrpots(policy: str, backend: str = "simulation") -> Scenario:
    """8 MapReduce jobs of the Tetris suite on 4 hosts whose CPU-heavy tasks want 3 of 4 cores and I/O-heavy
    ones the whole disk."""
    return _four_hosts(
        f"mrpots-small-{policy}",
        backend,
        seed=2,
        workers={
            "slots_per_host": 8,
            "cores_per_host": 4,
            "memory_mb_per_host": 16000,
            "disk_read_mbps_per_host": 16,
            "disk_write_mbps_per_host": 16,
            "container": {"cores": 1, "memory_mb": 1000},
        },
        workload={
            "source": "tetris-suite",
            "jobs": 8,
            "arrival_window_s": 30,
            "suite": {
                "maps_large": 12,
                "maps_medium": 6,
                "maps_small": 3,
                "block_mb": 200,
                "cpu_heavy_cores": 3,
                "io_share": 1.0,
                "cpu_heavy_s": 4,
                "io_heavy_s": 0.5,
                "memory_gb": [1, 2],
            },
        },
        scheduler={"policy": policy},
        max_duration_s=900,
    )


def small_dag(backend: str, workload: dict, max_duration_s: float) -> Scenario:
    """TPC-H-like DAG jobs under DAGPS on 4 hosts with room for all their tasks at once; `workload` gives the
    jobs, their arrivals and the DAG and task fields."""
    return _four_hosts(
        f"dag-small-{backend}",
        backend,
        seed=3,
        workers={
            "slots_per_host": 16,
            "cores_per_host": 12,
            "memory_mb_per_host": 32000,
            "disk_read_mbps_per_host": 16,
            "disk_write_mbps_per_host": 16,
        },
        workload={"source": "dag", **workload},
        scheduler={"policy": "dagps"},
        max_duration_s=max_duration_s,
    )
