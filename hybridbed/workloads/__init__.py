"""Where jobs come from: SWIM traces (`swim.py`), the synthetic Facebook-like generator (`synthetic.py`), the
Tetris suite (`tetris_suite.py`), TPC-DS/H-like DAGs (`dag.py`), the task derivation every MapReduce source
shares (`derivation.py`: maps per block, reducers per shuffle bytes, task durations), deadlines
(`deadlines.py`) and a scenario's jobs (`build.py`). Produces the scheduler's job specs; imports `config` and
`scheduler`."""
