"""Interrupts: runs that know they were stopped, and teardowns that a second Ctrl-C cannot cut short.

A signal that stops a run raises KeyboardInterrupt wherever the run is. A library cut short mid-call can then
fail in its own way (numba, stopped while compiling, later raises RuntimeError), and that error would mark the
run failed. So the handlers here note that a stop was asked, and `stops_as_interrupts` re-raises any error that
comes after as the interruption it is.

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
from typing import NoReturn

NOTICE = "hybridbed: still tearing down; `hybridbed clean` removes what is left if this process is killed"
_stop_asked = False  # a signal told this process to stop


def note_stop() -> None:
    """Note that this process was told to stop (what `stops_as_interrupts` and `stop_asked` read)."""
    global _stop_asked
    _stop_asked = True


def stop_asked() -> bool:
    """Whether a signal has told this process to stop."""
    return _stop_asked


def stop(signum: int, frame: object) -> NoReturn:
    """Signal handler: note that this process was told to stop, and unwind as Ctrl-C does."""
    note_stop()
    raise KeyboardInterrupt


def stop_on_signals() -> None:
    """Ctrl-C and SIGTERM stop this process with `stop` (SIGTERM then tears down in order, as Ctrl-C does)."""
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, stop)


@contextmanager
def stops_as_interrupts() -> Iterator[None]:
    """An error raised inside, after a signal told this process to stop, is re-raised as KeyboardInterrupt."""
    try:
        yield
    except Exception as err:
        if _stop_asked:
            raise KeyboardInterrupt from err
        raise


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
