"""The timeline tables (circuits, uplink utilisation, tasks per phase) from hand-made result files, and the
timeline plots from a simulated comparison."""

from __future__ import annotations

import json
from pathlib import Path

import matplotlib.image
import pandas as pd
import pytest

from hybridbed.config.fabric import FabricSpec
from hybridbed.controller.events import OcsEvent
from hybridbed.experiments.comparison import compare
from hybridbed.experiments.scenarios import load_scenario
from hybridbed.results.timeline import circuit_timeline, run_end_s, running_by_phase, uplink_utilisation
from hybridbed.results.timeline_plots import plot_run_timeline

REPO = Path(__file__).resolve().parents[2]


def events_csv(*events: tuple[list, list, float, float]) -> pd.DataFrame:
    def circuits(pairs):
        return [{"src_rack": a, "dst_rack": b, "src_port": 0, "dst_port": 0} for a, b in pairs]

    rows = [
        OcsEvent(
            seq, "periodic", dark_from, dark_from, dark_until, dark_until, 10.0, circuits(before), circuits(after)
        ).csv_row()
        for seq, (before, after, dark_from, dark_until) in enumerate(events)
    ]
    return pd.DataFrame(rows)


def test_circuits_are_bars_from_lighting_to_removal_with_the_dark_time_of_each_new_one():
    events = events_csv(
        ([], [(0, 1)], 1.0, 1.01),
        ([(0, 1)], [(0, 1), (2, 3)], 2.0, 2.01),  # 0->1 stays lit: no dark time for it
        ([(0, 1), (2, 3)], [(2, 3)], 5.0, 5.01),
    )
    timeline = circuit_timeline(events, run_end_s=8.0)
    lit = {(r.pair, r.from_s, r.until_s) for r in timeline.lit.itertuples()}
    assert lit == {("0->1", 1.01, 5.0), ("2->3", 2.01, 8.0)}  # still lit at the end: drawn to the run's end
    assert [(r.pair, r.from_s, r.until_s) for r in timeline.dark.itertuples()] == [
        ("0->1", 1.0, 1.01),
        ("2->3", 2.0, 2.01),
    ]
    assert timeline.pairs_by_time_lit() == ["2->3", "0->1"]  # 5.99 s lit before 3.99 s


def test_uplink_utilisation_is_bits_sent_per_second_over_the_racks_capacity():
    rows = []
    for t, eps0, ocs0, ocs1 in ((0.0, 0, 0, 0), (2.0, 250_000, 1_000_000, 0), (4.0, 250_000, 2_000_000, 1_000_000)):
        rows += [
            {"time_s": t, "switch": "tor0", "port": 3, "link": "tor0-eps", "tx_bytes": eps0, "rx_bytes": 0},
            {"time_s": t, "switch": "tor0", "port": 4, "link": "tor0-ocs0", "tx_bytes": ocs0, "rx_bytes": 0},
            {"time_s": t, "switch": "tor0", "port": 5, "link": "tor0-ocs1", "tx_bytes": ocs1, "rx_bytes": 0},
        ]
    utilisation = uplink_utilisation(pd.DataFrame(rows), eps_uplink_mbps=1.0, ocs_port_mbps=4.0)
    eps, ocs = utilisation["eps"][0], utilisation["ocs"][0]
    assert eps.isna().iloc[0] and ocs.isna().iloc[0]  # the first sample opens the first interval
    assert eps.iloc[1:].tolist() == pytest.approx([1.0, 0.0])  # 2 Mbit in 2 s on 1 Mb/s, then nothing
    assert ocs.iloc[1:].tolist() == pytest.approx([0.5, 1.0])  # over both 4 Mb/s ports: 8 Mb/s


def test_a_reduce_shuffles_until_its_last_fetch_ends_then_reduces():
    tasks = pd.DataFrame(
        [
            {"task_id": "j-m0", "attempt": 0, "kind": "map", "start_s": 0.0, "finish_s": 2.0},
            {"task_id": "j-r0", "attempt": 1, "kind": "reduce", "start_s": 1.0, "finish_s": 5.0},
        ]
    )
    flows = pd.DataFrame(
        [
            {"task_id": "j-r0", "attempt": 1, "kind": "shuffle", "end_s": 2.5},
            {"task_id": "j-r0", "attempt": 1, "kind": "shuffle", "end_s": 3.0},
            {"task_id": "j-r0", "attempt": 0, "kind": "shuffle", "end_s": 4.5},  # a killed attempt's fetch
            {"task_id": "j-m0", "attempt": 0, "kind": "input", "end_s": 1.5},
        ]
    )
    running = running_by_phase(tasks, flows)
    at = {t: running.loc[:t].iloc[-1].to_dict() for t in (0.5, 1.5, 2.5, 4.0, 5.0)}
    assert at[0.5] == {"map": 1, "shuffle": 0, "reduce": 0}
    assert at[1.5] == {"map": 1, "shuffle": 1, "reduce": 0}
    assert at[2.5] == {"map": 0, "shuffle": 1, "reduce": 0}
    assert at[4.0] == {"map": 0, "shuffle": 0, "reduce": 1}
    assert at[5.0] == {"map": 0, "shuffle": 0, "reduce": 0}
    assert run_end_s(tasks, pd.DataFrame(), pd.DataFrame()) == 5.0


def test_a_simulated_comparison_draws_every_setups_timeline_with_links_that_never_exceed_their_rate(tmp_path):
    scenario = load_scenario(REPO / "scenarios" / "quickstart.yaml", {"backend": "simulation"})
    setups = ["fair", "jobpacker", "f-eps"]
    compare(scenario, setups, tmp_path / "cmp")
    side_by_side = matplotlib.image.imread(tmp_path / "cmp" / "timelines.png")
    single = matplotlib.image.imread(tmp_path / "cmp" / "fair" / "timeline.png")
    assert side_by_side.shape[1] > 2.5 * single.shape[1]  # three columns
    for setup in setups:
        run = tmp_path / "cmp" / setup
        assert (run / "timeline.png").stat().st_size > 10_000
        fabric = FabricSpec.model_validate(json.loads((run / "scenario.json").read_text())["fabric"])
        utilisation = uplink_utilisation(pd.read_csv(run / "links.csv"), fabric.eps_uplink_mbps, fabric.ocs_rate_mbps)
        assert set(utilisation) == ({"eps", "ocs"} if fabric.has_ocs else {"eps"})
        for frame in utilisation.values():
            assert frame.max().max() <= 1.0 + 1e-9
        if fabric.has_ocs:
            assert utilisation["eps"].max().max() > 0.99  # the oversubscribed EPS is the bottleneck at times


def test_a_run_that_failed_before_its_first_task_still_gets_a_timeline(tmp_path):
    (tmp_path / "summary.json").write_text(json.dumps({"status": "failed"}))
    scenario = {"name": "x", "backend": "emulation", "scheduler": {"policy": "fair"}}
    (tmp_path / "scenario.json").write_text(json.dumps({**scenario, "fabric": {"racks": 2, "hosts_per_rack": 1}}))
    one_sample = {"time_s": -0.1, "switch": "tor0", "port": 2, "link": "tor0-eps", "tx_bytes": 0, "rx_bytes": 0}
    pd.DataFrame([one_sample]).to_csv(tmp_path / "links.csv", index=False)
    (tmp_path / "tasks.csv").write_text("task_id,job_id,kind,attempt,start_s,finish_s\n")
    assert plot_run_timeline(tmp_path).stat().st_size > 10_000
