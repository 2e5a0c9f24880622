"""Scheduling decisions, backend-agnostic: the job/stage/task model (`model.py`), what a policy sees
(`cluster.py`, `pending.py`), the policy interface and registry (`policy.py`), the core loop both backends
drive (`core.py`: submit, schedule, act, shuffle notices, lost hosts), input placement (`placement.py`),
transfer caps (`transfers.py`), stage paths (`dag_paths.py`) and the scheduler a scenario asks for
(`assembly.py`). The policies themselves live in `hybridbed.policies`. Imports only `config`."""
