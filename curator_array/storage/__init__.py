"""Where inputs and outputs live when that is not a POSIX path: object stores (``s3://``),
reached through pyarrow's filesystems. An adapter at the edge: the stages and the run ask it
for listings and bytes, and never see the store's SDK.

May import: core. Never Ray.
"""
