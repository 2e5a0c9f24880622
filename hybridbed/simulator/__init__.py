"""The flow-level backend: the same scheduler core and policies as the emulation, at any scale. Links and the
OCS as the flow model sees them (`fabric.py`), flows in flight (`flows.py`), max-min fair rates
(`fairshare.py`, computed over the links that bind by `relaxed_rates.py`) and the event loop (`engine.py`).
Imports `config`, `scheduler`, `workloads`, `results` and the controller's pure circuit computation."""
