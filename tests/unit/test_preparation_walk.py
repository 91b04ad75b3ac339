"""A shard's preparation, followed call by call, enters no module of ours more than three
times: it reads as a walk down the layers, not back and forth between them.

An entry is a call from one module of ours into a function, a class or a class method of
another, counted once per place it is called from (a loop over tasks is one entry). Calls
to an object's own methods (a stage's name, a listing's rows, a layout's paths) are the
object's answers and are not counted, nor is code run by an import.
"""

from __future__ import annotations

import inspect
import sys
from collections import Counter, defaultdict
from types import FrameType

import pytest

from curator_array.cli.run_command import parse_run_args
from curator_array.run.phases import PHASES
from curator_array.run.precedence import options_for_start, request_of
from curator_array.run.shard import _prepare
from curator_array.slurm.job_context import JobContext
from tests.conftest import SAMPLE

PACKAGE = "curator_array."
MOST_ENTRIES = 3


def _module(frame: FrameType | None) -> str | None:
    name = frame.f_globals.get("__name__", "") if frame is not None else ""
    return name[len(PACKAGE):] if name.startswith(PACKAGE) else None


def _is_method_call(frame: FrameType) -> bool:
    """A call to an object's own method (or property); its class's constructor (not a
    subclass's ``super()``) and its class methods are the class's entries."""
    code = frame.f_code
    if not code.co_argcount or code.co_varnames[0] != "self":
        return False
    member = inspect.getattr_static(type(frame.f_locals.get("self")), code.co_name, None)
    function = getattr(member, "fget", None) or getattr(member, "func", None) or member
    if getattr(function, "__code__", None) is not code:
        return False
    return code.co_name != "__init__" or frame.f_back.f_code.co_name == "__init__"


class Walk:
    """The entries into each module while ``sys.setprofile`` watches, by call site."""

    def __init__(self, root) -> None:
        self.root = root.__code__  # where the walk begins: import code above it is not the walk's
        self.sites: dict[str, set[tuple[str, int, str]]] = defaultdict(set)

    def __call__(self, frame: FrameType, event: str, arg) -> None:
        if event != "call" or frame.f_code.co_name == "<module>":
            return
        callee, caller = _module(frame), _module(frame.f_back)
        if callee is None or caller is None or callee == caller or _is_method_call(frame):
            return
        outer = frame.f_back
        while outer is not None and outer.f_code is not self.root:
            if outer.f_code.co_name == "<module>":
                return  # an import's code
            outer = outer.f_back
        where = frame.f_back
        self.sites[callee].add((f"{caller}.{where.f_code.co_name}", where.f_lineno, frame.f_code.co_name))

    def entries(self) -> Counter:
        return Counter({module: len(sites) for module, sites in self.sites.items()})

    def describe(self, module: str) -> str:
        return "; ".join(f"{caller}:{line} → {callee}" for caller, line, callee in sorted(self.sites[module]))


def walk_of(call) -> Walk:
    walk = Walk(call)
    sys.setprofile(walk)
    try:
        call()
    finally:
        sys.setprofile(None)
    return walk


@pytest.mark.parametrize("extra", [[], ["--dedup", "fuzzy"], ["--keep-removed", "--min-words", "3", "--repair"]], ids=["default", "dedup", "keep-removed"])
def test_a_shards_preparation_enters_each_module_at_most_three_times(tmp_path, extra):
    flags = parse_run_args(["--input-dir", str(SAMPLE / "jsonl"), "--output-dir", str(tmp_path / "out"), *extra])
    request = request_of(options_for_start(flags, {}))
    context = JobContext.from_env({"SLURM_ARRAY_TASK_ID": "1", "SLURM_ARRAY_TASK_COUNT": "2",
                                   "SLURM_ARRAY_TASK_MIN": "0", "SLURM_ARRAY_TASK_MAX": "1"})
    prepared = None

    def prepare():
        nonlocal prepared
        prepared = _prepare(request, request.layout, context, PHASES)

    for start in ("first", "later"):  # the first start walks and pins; a later one reads the frozen listing
        walk = walk_of(prepare)
        assert prepared.tasks, "the shard has tasks to run, so the walk went all the way"
        crowded = {module: n for module, n in walk.entries().items() if n > MOST_ENTRIES}
        assert not crowded, f"{start} start: " + " | ".join(
            f"{module} entered {n} times: {walk.describe(module)}" for module, n in crowded.items())
        assert len(walk.entries()) >= 10, "the walk saw the preparation's modules"

