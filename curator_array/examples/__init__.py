"""Example user pipelines, runnable with ``curator-array run --pipeline MODULE:FUNCTION``.

May import: core, stages, formats, pipelines (what a user's pipeline module may use).
"""
