"""Example user pipelines, runnable with ``curator-array run --pipeline MODULE:FUNCTION``."""
