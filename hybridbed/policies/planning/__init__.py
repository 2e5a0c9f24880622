"""Offline planners of the policies, pure computation over job profiles and DAGs: JobPacker's and Corral's
rack plans over a container timeline with their latency model, DAGPS's preferred schedule and lower bounds,
DSP's period MILP and priorities, MR-POTS's DRP and MUA."""
