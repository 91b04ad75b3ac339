"""Work spread over an element's CPUs: results in order, a bounded number in flight, the CPUs
granted, and a signatures file that is the same bytes with one worker and with two."""

from __future__ import annotations

import os

import numpy as np
import pyarrow as pa
import pytest

from curator_array.dedup.settings import MinHashSettings
from curator_array.helpers.parallel import AHEAD, granted_cpus, ordered_map
from curator_array.run.phases.signatures import write_signatures
from tests.support.quality_corpus import paragraphs


def square(value: int) -> int:
    return value * value


def test_results_come_in_the_order_of_the_work_and_few_are_in_flight():
    taken = []

    def items():
        for value in range(40):
            taken.append(value)
            yield value

    results = ordered_map(square, items(), workers=2)
    first = next(results)
    assert first == 0 and len(taken) <= 2 * AHEAD + 1, "the input is read as far as the workers need, no further"
    assert [first, *results] == [value * value for value in range(40)]
    assert list(ordered_map(square, range(5), workers=1)) == [0, 1, 4, 9, 16]


def inverse(value: int) -> float:
    return 1 / value


def test_an_error_in_a_worker_reaches_the_caller():
    with pytest.raises(ZeroDivisionError):
        list(ordered_map(inverse, [4, 2, 0, 1], workers=2))


def test_the_cpus_granted_are_the_first_set_within_the_affinity_mask():
    allowed = len(os.sched_getaffinity(0))
    assert granted_cpus(None, None, None) == allowed
    assert granted_cpus(None, 1, 8) == 1
    assert granted_cpus(None, None, 1) == 1
    assert granted_cpus(1, allowed, allowed) == 1
    assert granted_cpus(None, allowed + 64, None) == allowed, "never more than the process may run on"


@pytest.mark.parametrize("fuzzy", [True, False], ids=["fuzzy", "exact"])
def test_a_signatures_file_is_the_same_bytes_with_one_worker_or_two(tmp_path, fuzzy):
    documents = paragraphs()[:3000]
    texts = [d["text"] for d in documents]
    settings = MinHashSettings() if fuzzy else None

    def batches():
        for start in range(0, len(texts), 700):
            chunk = texts[start:start + 700]
            yield (np.arange(start, start + len(chunk), dtype=np.uint64), pa.array(chunk),
                   [("spaced", "en")] * len(chunk))

    counts = [write_signatures(batches(), tmp_path / f"{cpus}.bands", settings, buckets=3, cpus=cpus)
              for cpus in (1, 2)]
    assert counts == [len(texts)] * 2
    assert (tmp_path / "1.bands").read_bytes() == (tmp_path / "2.bands").read_bytes()


def test_workers_are_forked_only_in_a_process_that_never_loaded_ray():
    """A fork copies a Ray driver's threads in a broken state; without Ray it spares each
    worker its imports."""
    import subprocess
    import sys

    probe = ("import sys\n{}from curator_array.helpers.parallel import start_method, ordered_map\n"
             "from tests.unit.test_parallel import square\n"
             "print(start_method(), list(ordered_map(square, range(6), workers=2)))")
    for preamble, expected in (("", "fork"), ("import ray\n", "spawn")):
        out = subprocess.run([sys.executable, "-c", probe.format(preamble)], capture_output=True, text=True,
                             check=True, cwd=os.path.dirname(os.path.dirname(os.path.dirname(__file__)))).stdout
        assert out.split() == [expected, "[0,", "1,", "4,", "9,", "16,", "25]"]
