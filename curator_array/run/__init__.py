"""A run: its phases, and one element of one phase, from the request to the recorded outcome.

``option_table`` gathers every run option (the run's own, the default pipeline's filters',
the phases'), ``precedence`` chooses each one's value for a start, ``request`` holds what
one start runs, ``submission`` what submit and retry queue. ``phases`` is the registry of
a run's phases, one file each; ``element`` runs one element of one of them with the
context every phase's work gets (``lifecycle.PhaseContext``): a shard of the first
(``shard``: launch, prepare, start, run, record, stop, with ``prepare`` deciding everything
before Ray starts and ``runner`` recording each task and the manifest; ``stopping``,
``progress`` and ``timeline`` watch it), or an element of a later phase (``lifecycle``:
inputs checked, work done, manifest written).

May import: core, text, helpers, slurm, stages, formats, pipelines, execution, dedup, tokens, classify, decont, storage.
"""
