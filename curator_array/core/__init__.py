"""The pure core: what a run is and what its checkpoint says, as plain Python.

Sharding and array expressions, the checkpoint's layout and typed records, the run
contract in run.json, and what retry, status and plan compute from them. Everything a
login node needs to inspect or plan a run, without Ray, pyarrow or a SLURM command.

May import: nothing else of curator_array (the standard library only).
"""
