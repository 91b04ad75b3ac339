"""INFO lines of a start, held until the start has succeeded.

A start that is refused (a changed pipeline, a file that changed, a bad value found late)
should tell the user one thing: why. The lines it logged on its way there (the implicit
shard, the Ray head it launched) only bury that line, so they are held until the shard is
prepared, then written in order, or dropped when the start fails. Warnings and errors are
never held.
"""

from __future__ import annotations

import logging


class _Held(logging.Filter):
    def __init__(self) -> None:
        super().__init__()
        self.records: list[logging.LogRecord] = []
        self.holding = True

    def filter(self, record: logging.LogRecord) -> bool:
        if self.holding and record.levelno < logging.WARNING:
            self.records.append(record)
            return False
        return True


_held: _Held | None = None


def hold() -> None:
    """Hold this process's INFO lines from now until ``release`` or ``discard``."""
    global _held
    discard()
    _held = _Held()
    for handler in logging.getLogger().handlers:
        handler.addFilter(_held)


def release() -> None:
    """The start succeeded: write the held lines, and stop holding."""
    held = _stop()
    for record in held:
        logging.getLogger(record.name).handle(record)


def discard() -> None:
    """The start failed: drop the held lines (its error says what matters)."""
    _stop()


def _stop() -> list[logging.LogRecord]:
    global _held
    if _held is None:
        return []
    held, records = _held, _held.records
    held.holding = False
    for handler in logging.getLogger().handlers:
        handler.removeFilter(held)
    _held = None
    return records
