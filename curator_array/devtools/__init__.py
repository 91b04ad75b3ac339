"""Tools for testing and benchmarking curator-array itself (stdlib only, never used by a run)."""
