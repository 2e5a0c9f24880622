"""The validated, immutable description of a run, and nothing else of hybridbed: the fabric and its address
plan (`fabric.py`, `addressing.py`), the OCS settings, the workers, workload and scheduler sections of a
scenario and its loading (`scenario.py`), field-named validation errors (`validation.py`) and the model
constants more than one package uses, each with its source (`constants.py`). Every other package may
import it; it imports none of them."""
