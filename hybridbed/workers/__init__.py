"""What runs inside each emulated host: the worker agent (`agent.py`), one process per task attempt
(`task.py`: map, shuffle, reduce) and the launcher that forks those with the task code imported
(`launcher.py`), the shuffle fetch and the data server it fetches from (`fetch.py`), I/O
pacing (`pacing.py`), per-task cgroups (`cgroups.py`) and the typed control protocol shared with the
scheduler process (`protocol.py`). Imports only `config`."""
