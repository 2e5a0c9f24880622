"""A run's results, written by both backends the same way: CSV records flushed as they happen
(`records.py`), progress (`progress.py`), summary.json (`summary.py`), which path each flow took
(`path_accounting.py`) and a comparison's plots (`plots.py`). Uses the scheduler's job model and the
controller's OCS event type, nothing else."""
