"""From a scenario to results, the only package that knows both backends: scenario loading with the policy
registry's checks (`scenarios.py`), the backend dispatch (`backends.py`), an emulated run (`emulated.py`:
network, controller, scheduler process, workers), the central scheduler process itself
(`scheduler_process.py`), a simulated run (`simulated.py`) and policy comparisons (`comparison.py`)."""
