"""Applying stages to tasks, lazily: the part of execution that needs no Ray.

A stage's ``process`` may return one task, a list, None, or an iterator (a reader that
streams a large file in parts yields them). Outputs flow on one at a time, so a chain of
stages holds one part in memory, not one file. An exception becomes a ``FailedTask`` for
the input it came from; outputs already yielded for that input still go on, and the
shard is then incomplete anyway.
"""

from __future__ import annotations

import logging
import time
import traceback
from collections.abc import Iterable, Iterator, Mapping, Sequence

from .base import ProcessingStage
from .meter import StageMeter
from .tasks import FailedTask, Task

logger = logging.getLogger(__name__)


def _failure(task: Task, stage: ProcessingStage, exc: BaseException) -> FailedTask:
    logger.error("stage %s failed on %s:\n%s", stage.stage_name, task.task_id, traceback.format_exc())
    return task.failed(f"{type(exc).__name__}: {exc}", stage.stage_name)


def _outputs(result) -> Iterable[Task]:
    if result is None:
        return ()
    if isinstance(result, Task):
        return (result,)
    return result


def _tagged(task: Task, stage: ProcessingStage) -> Task:
    if isinstance(task, FailedTask) and not task.stage:
        task.stage = stage.stage_name
    return task


def _custom_batches(stage: ProcessingStage) -> bool:
    return type(stage).process_batch is not ProcessingStage.process_batch


def apply_stage(stage: ProcessingStage, tasks: Iterable[Task]) -> Iterator[Task]:
    """Outputs of ``stage`` for ``tasks``; FailedTasks pass through untouched."""
    if _custom_batches(stage):
        yield from _apply_batch(stage, list(tasks))
        return
    for task in tasks:
        if isinstance(task, FailedTask):
            yield task
            continue
        try:
            for output in _outputs(stage.process(task)):
                yield _tagged(output, stage)
        except Exception as exc:  # noqa: BLE001 - becomes a FailedTask with the reason
            yield _failure(task, stage, exc)
    yield from (_tagged(output, stage) for output in stage.finish())


def _apply_batch(stage: ProcessingStage, tasks: list[Task]) -> Iterator[Task]:
    """For stages that vectorise over several tasks: one failing task must not hide the
    others' results, so a batch that raises is retried one task at a time."""
    yield from (t for t in tasks if isinstance(t, FailedTask))
    todo = [t for t in tasks if not isinstance(t, FailedTask)]
    if not todo:
        return
    try:
        results = list(stage.process_batch(todo))
    except Exception as exc:  # noqa: BLE001
        if len(todo) == 1:
            yield _failure(todo[0], stage, exc)
            return
        results = []
        for task in todo:
            try:
                results += list(stage.process_batch([task]))
            except Exception as exc:  # noqa: BLE001
                results.append(_failure(task, stage, exc))
    yield from (_tagged(r, stage) for r in results)


_set_up_before = False  # whether this process has set up stages already


def set_up(stages: Sequence[ProcessingStage], started_for: str | None = None) -> dict[str, tuple[float, float]]:
    """Call each stage's ``setup``; the wall and CPU seconds each took, by stage. Loading a
    model is its stage's work: the time is charged to the stage's next output, so that the
    stage's figures (and a run's cores busy) count it.

    ``started_for`` names the stage a worker process was started for (an actor's). What the
    process spent before it set up any stage (Python, Ray's worker, the imports the stages
    need: 0.9 CPU-s per model actor) is then that stage's set-up too, as the bare loop's
    workers pay it in their wall time; a process that set up stages before charges nothing.
    """
    global _set_up_before
    started = time.process_time() if started_for is not None and not _set_up_before else 0.0
    _set_up_before = True
    spent = {}
    for stage in stages:
        wall, cpu = time.perf_counter(), time.process_time()
        stage.setup()
        spent[stage.stage_name] = (time.perf_counter() - wall, time.process_time() - cpu)
    if started_for in spent:
        wall, cpu = spent[started_for]
        spent[started_for] = (wall + started, cpu + started)
    return spent


def apply_chain(stages: Sequence[ProcessingStage], tasks: Iterable[Task], queued_s: float = 0.0,
                setup_s: Mapping[str, tuple[float, float]] | None = None) -> Iterator[Task]:
    """Several stages in one process, each output handed to the next as it appears, each
    stage's time measured and carried on its outputs (``meter``); ``queued_s`` is how long
    ``tasks`` waited before this process took them, charged to the first stage; ``setup_s``
    what each stage's set-up took (``set_up``), charged to its first output."""
    def cpu_clock() -> float:
        return time.process_time() + sum(stage.cpu_elsewhere_s() for stage in stages)

    meter = None
    for stage in stages:
        meter = StageMeter(stage.stage_name, meter, queued_s if meter is None else 0.0, cpu_clock=cpu_clock,
                           setup_s=(setup_s or {}).get(stage.stage_name, (0.0, 0.0)))
        tasks = meter.measure(apply_stage(stage, tasks))
    return iter(tasks)
