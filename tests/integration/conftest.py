"""Fixtures that bring up real emulated fabrics (Mininet, private Open vSwitch, os-ken). Root only."""
from __future__ import annotations

import os

import pytest

from hybridbed.testbed.network import HybridNetwork
from hybridbed.testbed.spec import FabricSpec, OcsSpec

pytestmark = pytest.mark.integration

RECONFIG_DELAY_MS = 50.0


def pytest_collection_modifyitems(items):
    if os.geteuid() != 0:
        skip = pytest.mark.skip(reason="integration tests need root")
        for item in items:
            if "integration" in str(item.fspath):
                item.add_marker(skip)


@pytest.fixture(scope="module")
def fabric() -> FabricSpec:
    return FabricSpec(racks=4, hosts_per_rack=2)


@pytest.fixture(scope="module")
def hybrid(fabric):
    """A pinned-mode hybrid fabric with a 50 ms reconfiguration delay, shared by a module's tests."""
    with HybridNetwork(fabric, OcsSpec(reconfig_delay_ms=RECONFIG_DELAY_MS)) as net:
        yield net


@pytest.fixture
def clean_circuits(hybrid):
    hybrid.controller.set_circuits([])
    yield hybrid
    hybrid.controller.set_circuits([])
