"""Teardowns that a second Ctrl-C cannot cut short.

A user who presses Ctrl-C again while a run is being torn down would otherwise raise KeyboardInterrupt inside
the teardown and leave namespaces, bridges and cgroups behind. While `deferred_interrupts` is active, SIGINT and
SIGTERM print a notice instead; the teardown finishes, and the interrupt that started it still ends the command.
Python delivers signals to the main thread only, so elsewhere (a run started from a thread, as tests do) the
guard does nothing.
"""

from __future__ import annotations

import signal
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager

NOTICE = "hybridbed: still tearing down; `hybridbed clean` removes what is left if this process is killed"


@contextmanager
def deferred_interrupts(notice: str = NOTICE) -> Iterator[None]:
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def tell(signum: int, frame: object) -> None:
        print(notice, file=sys.stderr, flush=True)

    previous = {sig: signal.signal(sig, tell) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
