"""Hostile scenario input: every malformed document is a SpecError naming the field (exit 2 from the CLI), never
a traceback, and nothing is created; a property-based test mutates a valid scenario at random."""

from __future__ import annotations

import copy
import math
import re
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hybridbed.cli import main
from hybridbed.config.servers import ServerSpec
from hybridbed.config.validation import SpecError
from hybridbed.experiments.feasibility import MEMORY_SHARE, RUN_FIXED_MB, emulation_memory_mb, emulation_problems
from hybridbed.experiments.scenarios import load_scenario
from hybridbed.testbed.capture import capture_missing
from hybridbed.workloads.build import build_workload

REPO = Path(__file__).resolve().parents[2]
QUICKSTART = REPO / "scenarios" / "quickstart.yaml"


def quickstart() -> dict:
    return yaml.safe_load(QUICKSTART.read_text())


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "s.yaml"
    path.write_text(text)
    return path


@pytest.mark.parametrize(
    "change, message",
    [
        ({"workload": 5}, r"workload: .*valid dictionary.*got 5"),
        ({"scheduler": "fair"}, r"scheduler: .*valid dictionary.*got 'fair'"),
        ({"max_duration_s": math.inf}, r"max_duration_s: .*finite number"),
        ({"max_duration_s": math.nan}, r"max_duration_s: .*finite number"),
        ({"fabric": {"racks": 4, "hosts_per_rack": 2, "host_rate_mbps": math.inf}}, r"fabric.host_rate_mbps: .*finite"),
        (
            {"scheduler": {"policy": "fair", "heartbeat_timeout_s": 0.1}},
            r"heartbeat_timeout_s 0.1 is under two heartbeats",
        ),
        ({"scheduler": {"policy_params": {"fair": {"node_delay_s": math.inf}}}}, r"policy_params.fair: .*finite"),
        ({"ocs": {"elephants_wait": True}}, r"ocs.elephants_wait needs ocs.steering elephant \(got all\)"),
        (
            {"backend": "emulation", "ocs": {"mode": "periodic", "steering": "elephant", "elephants_wait": True}},
            r"ocs.elephants_wait: only the simulation backend models",
        ),
    ],
)
def test_malformed_fields_are_named(tmp_path, change, message):
    data = {**quickstart(), **change}
    with pytest.raises(SpecError, match=message):
        load_scenario(write(tmp_path, yaml.safe_dump(data)))


def test_a_key_given_twice_is_refused_with_both_lines(tmp_path):
    text = QUICKSTART.read_text().replace("seed: 7\n", "seed: 7\nseed: 8\n")
    with pytest.raises(SpecError, match=r"key 'seed' is given twice \(first on line \d+\)"):
        load_scenario(write(tmp_path, text))
    nested = QUICKSTART.read_text().replace("  racks: 4\n", "  racks: 4\n  racks: 5\n")
    with pytest.raises(SpecError, match="key 'racks' is given twice"):
        load_scenario(write(tmp_path, nested))


def test_an_override_of_a_malformed_section_reports_the_section(tmp_path):
    path = write(tmp_path, yaml.safe_dump({**quickstart(), "scheduler": "fair"}))
    with pytest.raises(SpecError, match="scheduler: "):
        load_scenario(path, {"scheduler.policy": "corral"})


def test_an_override_reaches_a_field_of_a_subsection():
    scenario = load_scenario(QUICKSTART, {"workers.container.cores": 2})
    assert scenario.workers.container.cores == 2 and scenario.workers.container.memory_mb == 256


@pytest.mark.parametrize(
    "trace, message",
    [
        (b"this is not\ta swim\ntrace at all\n", r"garbage.tsv:1: expected 6 tab-separated columns"),
        (b"\xff\xfe\x00\x01binary", r"garbage.tsv: not a text trace"),
        (b"j1\tnan\t0\t10\t2000\t5\n", r"garbage.tsv:1: submit time must be a finite non-negative number"),
        (b"j1\t0\t0\tten\t2000\t5\n", r"garbage.tsv:1: invalid literal"),
    ],
)
def test_a_garbage_trace_is_a_field_error(tmp_path, trace, message):
    (tmp_path / "garbage.tsv").write_bytes(trace)
    data = {**quickstart(), "workload": {"source": "swim", "trace": "garbage.tsv", "jobs": 3}}
    scenario = load_scenario(write(tmp_path, yaml.safe_dump(data)))
    with pytest.raises(SpecError, match=message):
        build_workload(scenario)


def test_the_cli_refuses_a_bad_scenario_with_exit_2_and_writes_nothing(tmp_path, capsys):
    path = write(tmp_path, yaml.safe_dump({**quickstart(), "workload": 5}))
    out = tmp_path / "out"
    assert main(["run", str(path), "--backend", "simulation", "--out", str(out)]) == 2
    assert "workload" in capsys.readouterr().err and not out.exists()


@pytest.mark.parametrize(
    "argv, flag",
    [
        (["check", "--seconds", "-1"], "--seconds"),
        (["check", "--seconds", "inf"], "--seconds"),
        (["check", "--delay-ms", "-5"], "--delay-ms"),
    ],
)
def test_check_flags_out_of_range_are_named(argv, flag, capsys):
    with pytest.raises(SystemExit) as exit_:
        main(argv)
    assert exit_.value.code == 2 and flag in capsys.readouterr().err


# property: a valid scenario mutated anywhere is either still valid or a SpecError, never another exception

LEAVES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(10**12), max_value=10**12),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=12),
    st.lists(st.integers(min_value=-5, max_value=5), max_size=3),
    st.dictionaries(st.text(max_size=6), st.integers(), max_size=2),
)


def _paths(node: object, prefix: tuple = ()) -> list[tuple]:
    """Every key path of a nested mapping, inner nodes included."""
    if not isinstance(node, dict):
        return [prefix]
    found = [prefix] if prefix else []
    for key, value in node.items():
        found += _paths(value, (*prefix, key))
    return found


PATHS = _paths(quickstart())
SECTIONS = [p for p in PATHS if len(p) == 1] + [("scheduler", "policy_params"), ("workload", "shape")]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    edits=st.lists(
        st.tuples(st.sampled_from(PATHS + SECTIONS), st.one_of(LEAVES, st.just("__delete__"))), min_size=1, max_size=3
    ),
    extra=st.one_of(st.none(), st.tuples(st.sampled_from(SECTIONS), st.text(min_size=1, max_size=8), LEAVES)),
)
def test_any_mutated_scenario_is_valid_or_a_field_error(tmp_path, edits, extra):
    data = copy.deepcopy(quickstart())
    for path, value in edits:
        node = data
        for key in path[:-1]:
            node = node.setdefault(key, {}) if isinstance(node, dict) else node
        if not isinstance(node, dict):
            continue
        if value == "__delete__":
            node.pop(path[-1], None)
        else:
            node[path[-1]] = value
    if extra is not None:  # a field nobody declared, in some section
        section_path, key, value = extra
        section: object = data
        for name in section_path:
            section = section.get(name) if isinstance(section, dict) else None
        if isinstance(section, dict):
            section[key] = value
    try:
        scenario = load_scenario(write(tmp_path, yaml.safe_dump(data, allow_unicode=True)))
        build_workload(scenario)
    except SpecError:
        pass


def test_an_emulated_fabric_larger_than_the_machine_is_refused_before_anything_is_built(tmp_path):
    data = {**quickstart(), "fabric": {**quickstart()["fabric"], "racks": 250, "hosts_per_rack": 250}}
    path = write(tmp_path, yaml.safe_dump(data))
    with pytest.raises(
        SpecError, match=r"fabric: 62500 hosts on this machine \(of 250 racks x 250\) .* need about [\d,]+ MB"
    ):
        load_scenario(path)
    assert load_scenario(path, {"backend": "simulation"}).fabric.racks == 250  # the simulator takes any size
    small = load_scenario(QUICKSTART)
    assert emulation_problems(small, available_mb=emulation_memory_mb(small) / MEMORY_SHARE + 1) == []
    assert emulation_problems(small, available_mb=emulation_memory_mb(small) / MEMORY_SHARE - 1)


def test_a_congestion_control_the_kernel_lacks_is_refused_before_anything_is_built(tmp_path):
    quick = load_scenario(QUICKSTART)
    assert quick.fabric.tcp_congestion_control == "cubic"  # the default, whatever the machine's is
    (problem,) = emulation_problems(quick, congestion_controls=["reno", "bbr"])
    assert problem.startswith("fabric.tcp_congestion_control: 'cubic' is not in") and "reno bbr" in problem
    assert emulation_problems(quick, congestion_controls=["reno", "cubic"]) == []
    for value, error in [("no_such_cc", "'no_such_cc' is not in"), ("cubic; reboot", "tcp_congestion_control")]:
        data = {**quickstart(), "fabric": {**quickstart()["fabric"], "tcp_congestion_control": value}}
        with pytest.raises(SpecError, match=re.escape(error)):
            load_scenario(write(tmp_path, yaml.safe_dump(data)))


def test_a_fabric_spread_over_servers_is_weighed_by_the_hosts_on_this_machine():
    alone = load_scenario(QUICKSTART)  # 4 racks: 2 stay here when one further server takes the others
    spread = alone.model_copy(update={"servers": [ServerSpec(host="192.0.2.2")]})
    assert emulation_memory_mb(spread) - RUN_FIXED_MB == pytest.approx((emulation_memory_mb(alone) - RUN_FIXED_MB) / 2)


def test_packet_capture_over_several_servers_is_a_scenario_like_any_other():
    spread = {"capture_packets": True, "servers": [{"host": "192.0.2.2"}]}  # their hosts stream over ssh
    assert load_scenario(QUICKSTART, spread).capture_packets


def test_a_capture_without_tcpdump_names_the_field(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))  # nothing to run here
    assert "capture_packets: tcpdump is not installed" in (capture_missing() or "")
