"""curator-array: sharded data-curation pipelines on SLURM job arrays, executed on Ray Data.

The subpackages are layers; each may import only the layers its docstring names (a test,
``tests/unit/test_layers.py``, keeps that true), so the pure core can be imported and
tested on a login node without Ray, SLURM or a container:

==============  =================================================================
``core``        pure: sharding, array expressions, the checkpoint's layout and
                records, the run contract, what a phase and a run option are,
                retry, status, plan, the format catalog
``text``        word segmenters per script, word n-gram keys, the language column
``helpers``     the helper processes' allocator (mimalloc or the system's), work
                spread over an element's CPUs in order
``storage``     object stores (``s3://``): listings and bytes through pyarrow, uploads
                through boto3; where a writer's files go (a directory or a prefix)
``tokens``      token files for training: the tokenizer, Megatron's and datatrove's
                formats, their merge
``slurm``       SLURM: its commands, the job environment, shard resolution,
                submission windows, site scripts
``stages``      the stage API (what a stage pins, reads, writes and needs),
                sources, filters, downloads, web text stages
``formats``     the file formats, one module each
``dedup``       deduplication's algorithms and settings (MinHash, LSH, clusters)
``decont``      decontamination: the eval sets' n-gram index, matching, GPT-3's cut
``classify``    fastText quality classifiers: scores as DCLM computes them, the
                run's models and selection settings, training a model
``pipelines``   a pipeline, its options, the default pipeline's filters, the
                built-in pipelines
``examples``    example user pipelines
``execution``   Ray: private clusters, the node launcher, clients, Ray Data
``report``      the HTML page about a run
``run``         the option table, the phases of a run (``run.phases``, one file
                each, with their options) and one element of one phase, from
                request to recorded outcome
``cli``         the ``curator-array`` commands and the container entrypoint
==============  =================================================================
"""

__version__ = "0.1.0"
