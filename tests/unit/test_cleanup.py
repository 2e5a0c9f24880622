"""Removing a run's state directory when another cleanup of the same run removes entries under it meanwhile (no
network needed: a run with no namespace or cgroup recorded has only its state directory to lose)."""

from __future__ import annotations

import os

import pytest

from hybridbed.testbed import cleanup
from hybridbed.testbed.runs import RunManifest, start_ticks


def manifest_with_state(tmp_path) -> RunManifest:
    state = tmp_path / "hbtest"
    (state / "r5h0").mkdir(parents=True)
    (state / "r5h0" / "agent.log").write_text("")
    return RunManifest("hbtest", str(state), 0.0, os.getpid(), start_ticks(os.getpid()))


def test_entries_another_cleanup_removed_first_are_not_an_error(tmp_path, monkeypatch):
    manifest = manifest_with_state(tmp_path)
    rmdir = os.rmdir

    def raced(path, *, dir_fd=None):  # the other cleanup takes the directory just before this one does
        rmdir(path, dir_fd=dir_fd)
        rmdir(path, dir_fd=dir_fd)

    monkeypatch.setattr(os, "rmdir", raced)
    assert cleanup.clean_run(manifest) == [f"removed {manifest.state_dir}"]
    assert not os.path.exists(manifest.state_dir)


def test_other_errors_removing_the_state_stand(tmp_path, monkeypatch):
    manifest = manifest_with_state(tmp_path)

    def refused(path, *, dir_fd=None):
        raise PermissionError(13, "Permission denied", path)

    monkeypatch.setattr(os, "rmdir", refused)
    with pytest.raises(PermissionError):
        cleanup.clean_run(manifest)
