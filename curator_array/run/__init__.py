"""One shard's run, from the request to the recorded outcome.

``options`` defines every run option once; ``request`` holds what one run is asked to
do; ``prepare`` decides everything before Ray starts (the run contract, this shard's
tasks); ``shard`` owns the sequence (launch, prepare, start, run, record, stop);
``runner`` runs the tasks and writes the manifest or the failure records; ``stopping``,
``progress`` and ``timeline`` watch it; ``dedup`` runs the elements of the dedup phases
that follow the curation phase.

May import: core, slurm, stages, formats, pipelines, execution, dedup.
"""
