"""The package layering, read from the code's own imports (ast): no import circle between files, and every
package imports only the packages its row below allows. docs/architecture.md explains the order."""

from __future__ import annotations

import ast
from pathlib import Path

import networkx as nx
import pytest

ROOT = Path(__file__).resolve().parents[2] / "hybridbed"

# package -> the packages it may import; a "package.module" entry allows that module only.
ALLOWED: dict[str, set[str]] = {
    "config": set(),
    "scheduler": {"config"},
    "policies": {"config", "scheduler"},
    "workloads": {"config", "scheduler"},
    "controller": {"config"},
    "workers": {"config"},
    "testbed": {"config", "controller", "workers.cgroups"},
    "results": {"config", "scheduler.model", "controller.events"},
    "simulator": {
        "config",
        "scheduler",
        "workloads",
        "results",
        "controller.circuits",
        "controller.circuit_schedulers",
        "controller.events",
        "controller.demand_log",
        "workers.shuffle",
        "workers.host_share",
    },
    "experiments": {
        "config",
        "scheduler",
        "policies",
        "workloads",
        "controller",
        "workers",
        "testbed",
        "results",
        "simulator",
    },
    "cli": {"config", "scheduler", "experiments", "testbed", "workloads", "results"},
}


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports() -> nx.DiGraph:
    """Module -> the hybridbed modules it imports (at any depth: function-level imports count too)."""
    modules = {module_name(p): p for p in ROOT.rglob("*.py")}
    graph = nx.DiGraph()
    for name, path in modules.items():
        graph.add_node(name)
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                targets = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
            elif isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            else:
                continue
            for target in targets:
                if target in modules and target != name:
                    graph.add_edge(name, target)
    return graph


def package_of(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "(root)"


def test_no_relative_imports():
    relative = [
        str(p)
        for p in ROOT.rglob("*.py")
        if any(isinstance(n, ast.ImportFrom) and n.level for n in ast.walk(ast.parse(p.read_text())))
    ]
    assert not relative, "use absolute imports, so the layering check sees them"


def test_no_import_circle_between_files():
    assert list(nx.simple_cycles(imports())) == []


@pytest.mark.parametrize("package", sorted(ALLOWED))
def test_a_package_imports_only_what_its_layer_allows(package):
    allowed = ALLOWED[package]
    wrong = []
    for src, dst in imports().edges:
        if package_of(src) != package or package_of(dst) == package:
            continue
        dst_package, dst_module = package_of(dst), ".".join(dst.split(".")[1:3])
        if dst_package not in allowed and dst_module not in allowed:
            wrong.append(f"{src} imports {dst}")
    assert not wrong, "\n".join(wrong)


def test_every_package_has_a_layer():
    packages = {package_of(m) for m in imports().nodes} - {"(root)"}
    assert packages == set(ALLOWED), "give a new package its row in ALLOWED (and in docs/architecture.md)"


def test_no_package_holds_more_than_a_third_of_the_code():
    lines: dict[str, int] = {}
    for path in ROOT.rglob("*.py"):
        package = package_of(module_name(path))
        lines[package] = lines.get(package, 0) + len(path.read_text().splitlines())
    total = sum(lines.values())
    assert max(lines.values()) / total <= 0.35, {p: round(n / total, 3) for p, n in sorted(lines.items())}
