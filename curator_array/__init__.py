"""curator-array: sharded data-curation pipelines on SLURM job arrays, executed on Ray Data.

The package is layered (see DESIGN.md): the pure core (``sharding``, ``arrays``,
``checkpoint``, ``retry``, ``status``) uses the standard library only, so it can be
imported and tested on a login node without Ray, SLURM or a container.
"""

__version__ = "0.1.0"
