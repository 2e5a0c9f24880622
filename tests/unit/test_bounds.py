"""The makespan lower bounds per resource: a workload's total demand over the cluster's capacity."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from hybridbed.config.scenario import parse_scenario, read_scenario
from hybridbed.scheduler.model import JobSpec, Resources
from hybridbed.workloads.bounds import NETWORK, makespan_lower_bounds, workload_bounds

SCENARIOS = Path(__file__).resolve().parents[2] / "scenarios"


def test_each_bound_is_the_total_demand_over_the_capacity():
    # 4 maps of 2 cores x 10 s, reading 100 MB blocks at 100 Mb/s (8 s) and writing 25 MB each; 2 reduces
    # of 1 core x 5 s fetching 50 MB at 200 Mb/s (2 s) and writing 10 MB each
    job = JobSpec(
        "j", 0.0, 400_000_000, 100_000_000, 20_000_000, 4, 2, 10.0, 5.0,
        map_demand=Resources(2, 1000, disk_read_mbps=100),
        reduce_demand=Resources(1, 500, net_in_mbps=200),
    )  # fmt: skip
    capacity = Resources(4, 4000, disk_read_mbps=400, disk_write_mbps=200, net_in_mbps=1000, net_out_mbps=1000)
    bounds = workload_bounds([job], capacity, hosts=2, slots=4, default_demand=Resources())
    assert bounds["cores"] == pytest.approx((4 * 2 * 10 + 2 * 1 * 5) / 8)
    assert bounds["memory"] == pytest.approx((4 * 1000 * 10 + 2 * 500 * (2 + 5)) / 8000)
    assert bounds["containers"] == pytest.approx((4 * 10 + 2 * 7) / 8)
    assert bounds["disk read"] == pytest.approx(400 * 8 / 800)
    assert bounds["disk write"] == pytest.approx((100 + 20) * 8 / 400)
    assert bounds[NETWORK] == pytest.approx(100 * 8 / 2000)


def test_dimensions_a_scenario_does_not_model_are_left_out():
    bounds = workload_bounds([JobSpec("j", 0.0, 10, 10, 10, 1, 1, 1.0, 1.0)], Resources(1, 1000), 1, 1, Resources())
    assert set(bounds) == {"cores", "memory", "containers"}


def stated_bounds(path: Path) -> dict[str, float] | None:
    """The bounds a scenario's opening comment states, as `bounds.py`'s names to seconds (None: none)."""
    lines = path.read_text().splitlines()
    start = next((i for i, line in enumerate(lines) if line.startswith("# lower bounds on the makespan")), None)
    if start is None:
        return None
    text = ""
    for line in lines[start + 1 :]:
        if not re.fullmatch(r"#\s+.* [\d.]+ s,?", line):
            break
        text += line.lstrip("# ") + " "
    return {name: float(seconds) for name, seconds in re.findall(r"\s*([^,]+?) ([\d.]+) s(?:,|\s|$)", text)}


@pytest.mark.parametrize("path", sorted(SCENARIOS.glob("*.yaml")), ids=lambda p: p.stem)
def test_a_scenario_states_the_bounds_of_its_workload(path):
    stated = stated_bounds(path)
    if stated is None:
        assert not path.stem.startswith("tetris"), "the Tetris scenarios state their bounds"
        return
    computed = makespan_lower_bounds(parse_scenario(read_scenario(path)))
    assert stated == pytest.approx({name: round(s, 1) for name, s in computed.items()}, abs=0.051)
