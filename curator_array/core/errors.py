"""Exceptions that carry the exit code the CLI should report.

Library code raises these; only the CLI and the entrypoint turn them into exit codes,
so the same functions stay usable from a notebook or another tool.
"""


class CuratorArrayError(Exception):
    """Base class: an expected failure with a message meant for the user."""

    exit_code = 1


class ConfigError(CuratorArrayError):
    """Wrong or conflicting configuration (environment, flags, checkpoint mismatch)."""

    exit_code = 2


class CheckpointMismatchError(ConfigError):
    """The checkpoint belongs to a different logical run than this attempt."""


class CorruptCheckpointError(CuratorArrayError):
    """A file in the checkpoint directory cannot be read as what it claims to be."""


class InputError(CuratorArrayError):
    """Input data that cannot be listed or read."""
