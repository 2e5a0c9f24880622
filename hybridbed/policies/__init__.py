"""The scheduling policies shipped with hybridbed, each registered under the `hybridbed.policies` entry point
group (a third-party package adds its own the same way): Fair, FIFO, DRF, Corral and JobPacker (`planned.py`
runs their offline plans), Tetris, DAGPS and the Tez baselines, DSP and its preemption baselines, MR-POTS
and its baselines, Aalo. Their planners are in `planning/` (the JobPacker planner: `planning/jobpacker.py`;
the latency model both it and Corral use: `planning/latency.py`). Imports `config` and `scheduler`."""
