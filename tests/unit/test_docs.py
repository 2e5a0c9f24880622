"""The documentation stays true: the scenario reference is what the models accept, and every link between
the README and docs/ leads somewhere."""

from __future__ import annotations

import re
from pathlib import Path

from hybridbed.experiments.scenario_reference import scenario_reference

REPO = Path(__file__).resolve().parents[2]


def test_the_scenario_reference_is_generated_from_the_current_models():
    written = (REPO / "docs" / "scenario-reference.md").read_text()
    assert written == scenario_reference(), (
        "docs/scenario-reference.md is stale: python -m hybridbed.experiments.scenario_reference > "
        "docs/scenario-reference.md"
    )


def test_every_field_of_the_reference_says_what_it_is():
    undescribed = [
        line for line in scenario_reference().splitlines() if line.startswith("| `") and line.endswith("|  |")
    ]
    assert not undescribed, undescribed


def test_every_relative_link_of_the_readme_and_docs_leads_to_a_file():
    pages = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
    broken = []
    for page in pages:
        for target in re.findall(r"\]\(([^)#:]+)(?:#[^)]*)?\)", page.read_text()):
            if not (page.parent / target).exists():
                broken.append(f"{page.relative_to(REPO)} -> {target}")
    assert not broken, broken
    assert len((REPO / "README.md").read_text().splitlines()) < 200
