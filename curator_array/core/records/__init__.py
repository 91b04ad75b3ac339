"""The records a checkpoint holds, as types that read and write their own JSON, one module
per thing they describe: ``shard`` (a shard's completion manifest and its work), ``attempt``
(who ran an attempt, and what an incomplete one left), ``run`` (the frozen listing's
reference, pinned run options), ``submission`` (the windows submit queued) and ``phase``
(the elements of the later phases), ``contamination`` (what decontamination found). ``base`` holds what they share.

Every other module uses their fields; none reads another module's JSON by string keys.
Each record carries a ``schema_version``. A record without one was written by an earlier
curator-array (version 1) and still reads: fields it lacks take their defaults. A
completion manifest of the reference system holds only its four spec fields
(``minimum_shard_index``, ``shard_index``, ``status``, ``total_shards``) and counts as
complete all the same. Fields this version does not know are kept in ``extra``.
"""
