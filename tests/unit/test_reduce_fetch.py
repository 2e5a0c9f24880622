"""A reducer's fetch loop without a network: a failed fetch from a live host is tried again."""

from __future__ import annotations

import queue

from hybridbed.workers import task as task_module
from hybridbed.workers.fetch import Fetch, FetchError


def test_a_stalled_fetch_is_retried_until_it_succeeds(tmp_path, monkeypatch, capsys):
    attempts: dict[str, int] = {}

    def flaky_fetch(ip, path, rate_bps=None, pacer=None):
        attempts[path] = attempts.get(path, 0) + 1
        if path == "m1" and attempts[path] < 3:
            raise FetchError("timed out")
        return Fetch(ip, path, 100, 0.0, 0.1)

    monkeypatch.setattr(task_module, "fetch", flaky_fetch)
    monkeypatch.setattr(task_module, "FETCH_RETRY_S", 0.01)
    notices: queue.Queue[dict] = queue.Queue()
    for index in range(2):
        notices.put({"source": f"m{index}", "ip": "10.0.0.1", "host": "h", "path": f"m{index}"})
    reduce = {
        "n_sources": 2,
        "compute_s": 0,
        "compute_mode": "sleep",
        "output_dir": "out",
        "partitions": [],
        "output_bytes": 10,
    }
    totals = task_module.run_reduce(reduce, tmp_path, notices, task_module.Speed(1.0), task_module.Rates(reduce))
    assert totals["fetched_bytes"] == 200 and attempts["m1"] == 3 and attempts["m0"] == 1
    assert capsys.readouterr().out.count('"kind": "shuffle"') == 2
