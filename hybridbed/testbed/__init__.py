"""The emulated network and nothing else: the Mininet topology with its private Open vSwitch and controller
(`network.py`, `ovs.py`), link shaping (`shaping.py`), isolation in a namespace and a run cgroup
(`isolation.py`), what a run created (`runs.py`), its cleanup (`cleanup.py`), the watchdog that cleans it
when its owner dies (`watchdog.py`) and a teardown that a second Ctrl-C cannot cut short (`interrupts.py`),
probes (`probes.py`, with the ends of their measured flows in `measured_flow.py`) and the fidelity check
(`fidelity.py`). Imports `config`, `controller` and the cgroup mechanics of `workers`."""
