"""State a stage needs in each worker process: a model, an extraction sandbox, block lists.

Such state is expensive to make and cannot travel with the stage (Ray pickles a stage to
send it to its workers), so it is made on first use in each process, once for every stage
of that process that asks for the same thing, and never stored on the stage::

    class LanguageFilter(FilterStage):
        model = PerProcess(lambda stage: load_model(stage.model_path), key=lambda stage: stage.model_path)

``stage.model`` is then the model of this process. A process that forks has its own: the
key includes the process id.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Hashable
from typing import Any, Generic, TypeVar

Value = TypeVar("Value")

_MADE: dict[tuple, Any] = {}


class PerProcess(Generic[Value]):
    """A stage attribute whose value ``make(stage)`` makes once per process and per
    ``key(stage)``; ``alive(value)`` (if given) says whether a value made earlier can still be
    used (a helper process that died is made again)."""

    def __init__(self, make: Callable[[Any], Value], key: Callable[[Any], Hashable] = lambda stage: (),
                 alive: Callable[[Value], bool] | None = None):
        self.make, self.key, self.alive = make, key, alive
        self.name = ""

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = f"{owner.__module__}.{owner.__qualname__}.{name}"

    def _slot(self, stage: Any) -> tuple:
        return os.getpid(), self.name, self.key(stage)

    def __get__(self, stage: Any, owner: type | None = None) -> Any:
        if stage is None:
            return self
        slot = self._slot(stage)
        value = _MADE.get(slot)
        if slot not in _MADE or (self.alive is not None and not self.alive(value)):
            value = _MADE[slot] = self.make(stage)
        return value

    def made(self, stage: Any) -> Value | None:
        """The value if this process has made it, without making it."""
        return _MADE.get(self._slot(stage))
