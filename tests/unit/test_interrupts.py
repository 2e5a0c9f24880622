"""A teardown inside deferred_interrupts runs to its end whatever signals arrive, and the handlers come back after."""

from __future__ import annotations

import os
import signal
import threading
import time

from hybridbed.testbed.interrupts import deferred_interrupts


def test_interrupts_during_a_teardown_print_a_notice_instead_of_aborting_it(capsys):
    before = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
    steps = []
    with deferred_interrupts("busy tearing down"):
        for sig in (signal.SIGINT, signal.SIGINT, signal.SIGTERM):
            os.kill(os.getpid(), sig)
            time.sleep(0.05)
            steps.append(sig)
    assert len(steps) == 3
    assert capsys.readouterr().err.count("busy tearing down") == 3
    assert {sig: signal.getsignal(sig) for sig in before} == before


def test_outside_the_main_thread_the_guard_leaves_the_handlers_alone():
    seen = []

    def teardown():
        with deferred_interrupts():
            seen.append(signal.getsignal(signal.SIGINT))

    thread = threading.Thread(target=teardown)
    thread.start()
    thread.join()
    assert seen == [signal.getsignal(signal.SIGINT)]
