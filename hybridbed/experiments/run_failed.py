"""The one way a backend says that a run ended without finishing its workload."""

from __future__ import annotations


class RunFailed(RuntimeError):
    """A run ended without finishing its workload; what it wrote stays in its results directory."""
