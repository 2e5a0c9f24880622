"""Model constants that more than one package uses, each with the source of its value."""

from __future__ import annotations

# Hadoop's mapreduce.reduce.shuffle.parallelcopies default: a reducer fetches from at most this many map
# outputs at once (emulated workers and the simulator alike).
PARALLEL_FETCHES = 5
