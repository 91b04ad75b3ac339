"""Where inputs and outputs live: object stores (``s3://``), read through pyarrow's
filesystems and written through boto3, and the places a writer puts files in (a directory
or a prefix, ``places``). An adapter at the edge: the stages and the run ask it for
listings, bytes and files in place, and never see the store's SDK.

May import: core. Never Ray.
"""
