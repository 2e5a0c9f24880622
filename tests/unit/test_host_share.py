"""Sharing a host's cores among the tasks computing on it: quotas while they fit, max-min beyond."""

from __future__ import annotations

import pytest

from hybridbed.workers.host_share import HostShare, capped_fair_shares


def test_quotas_that_fit_are_given_in_full():
    assert capped_fair_shares({"a": 1.0, "b": 0.5}, capacity=2) == {"a": 1.0, "b": 0.5}


def test_over_committed_cores_are_split_equally_and_a_small_quota_leaves_its_rest_to_the_others():
    assert capped_fair_shares({"a": 2.0, "b": 2.0}, capacity=2) == {"a": 1.0, "b": 1.0}
    shares = capped_fair_shares({"a": 4.0, "b": 0.5, "c": 2.0}, capacity=3)
    assert shares == {"b": 0.5, "a": pytest.approx(1.25), "c": pytest.approx(1.25)}
    assert sum(shares.values()) == pytest.approx(3)


def test_a_host_reports_whose_cores_changed_as_tasks_come_and_go():
    host = HostShare(capacity=2)
    assert host.set("a", 2.0) == {"a": 2.0}
    assert host.set("b", 2.0) == {"a": 1.0, "b": 1.0}
    assert host.set("c", 0.0) == {"c": 0.0}  # nobody else's share moved
    assert host.set("a", None) == {"b": 2.0}  # a stopped: b gets its whole quota back
    assert host.given == {"b": 2.0, "c": 0.0}
