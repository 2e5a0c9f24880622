"""Loading a scenario for a run: its structure (config/) and what only the policy registry knows (policy
names and parameters, comparison setups), checked together so that a bad scenario gives one message
naming every bad field before anything is created."""

from __future__ import annotations

from pathlib import Path

from hybridbed.config.scenario import F_EPS, Scenario, parse_scenario, read_scenario
from hybridbed.config.validation import SpecError
from hybridbed.experiments.feasibility import emulation_problems
from hybridbed.scheduler.policy import policy_problems, registered_policies


def available_setups() -> list[str]:
    """What a comparison can run: every registered policy, and F-EPS."""
    return sorted(registered_policies()) + [F_EPS]


def load_scenario(path: Path, overrides: dict | None = None) -> Scenario:
    """Read and validate a scenario file (`overrides`: "backend" or "section.field" -> value)."""
    return validate_scenario(read_scenario(path, overrides))


def validate_scenario(data: dict) -> Scenario:
    """A scenario from its fields, fully checked (an emulated one also against this machine's memory); every
    problem is a SpecError naming the field."""
    scenario = parse_scenario(data)
    known = available_setups()
    problems = policy_problems(scenario.scheduler)
    if unknown := [s for s in scenario.compare or [] if s not in known]:
        problems.append(f"compare: unknown setup {', '.join(unknown)}; available: {', '.join(known)}")
    if scenario.compare_baseline not in known:
        problems.append(f"compare_baseline: unknown setup {scenario.compare_baseline}; available: {', '.join(known)}")
    if scenario.backend == "emulation":
        problems += emulation_problems(scenario)
    if problems:
        raise SpecError("; ".join(problems))
    return scenario
