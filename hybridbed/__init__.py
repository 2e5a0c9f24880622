"""hybridbed: an emulation testbed for job scheduling in hybrid electrical/optical datacenter networks."""
