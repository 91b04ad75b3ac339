"""A loaded model's large regions move onto huge pages once scoring took long enough; small
ones, and everything the load did not map, stay as they are; without /proc, the load is all."""

import ctypes
import mmap
import sys
import time
from pathlib import Path

import pytest

from curator_array.classify import model_pages
from tests.conftest import need

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="transparent huge pages are Linux's")


def _huge_kib(region: mmap.mmap) -> int:
    """AnonHugePages of the mapping that holds ``region`` (from /proc/self/smaps)."""
    address, _ = _bounds(region)
    inside = False
    for line in Path("/proc/self/smaps").read_text().splitlines():
        fields = line.split()
        if "-" in fields[0] and len(fields) >= 5:
            start, end = (int(bound, 16) for bound in fields[0].split("-"))
            inside = start <= address < end
        elif inside and fields[0] == "AnonHugePages:":
            return int(fields[1])
    raise AssertionError("the region is not in /proc/self/smaps")


def _touched(size: int) -> mmap.mmap:
    """What malloc gives a model's matrix: a private anonymous mapping, every page written."""
    region = mmap.mmap(-1, size, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    for offset in range(0, size, mmap.PAGESIZE):
        region[offset] = 1
    return region


def _collapse_supported() -> bool:
    probe = _touched(8 << 20)
    try:
        return model_pages._collapse(*_bounds(probe)) > 0
    finally:
        probe.close()


def _bounds(region: mmap.mmap) -> tuple[int, int]:
    start = ctypes.addressof(ctypes.c_char.from_buffer(region))
    return start, start + len(region)


def _huge_pages_possible() -> None:
    need(Path("/sys/kernel/mm/transparent_hugepage/enabled").exists() and _collapse_supported(),
         "this kernel cannot collapse memory onto huge pages (MADV_COLLAPSE, Linux 6.1, THP on)")


def test_a_large_region_a_load_maps_moves_onto_huge_pages_once_scoring_took_long_enough(monkeypatch):
    _huge_pages_possible()
    monkeypatch.setattr(model_pages, "MOVE_AFTER_S", 0.2)
    regions, kept = model_pages.LargeRegions(), []

    def load():
        kept.append(_touched(model_pages.LARGE + (8 << 20)))
        return "the model"

    assert regions.load(load) == "the model"
    with regions.scoring():
        pass
    assert _huge_kib(kept[0]) == 0, "a short shard never pays for the move"
    with regions.scoring():
        time.sleep(0.25)
    assert _huge_kib(kept[0]) >= (model_pages.LARGE >> 10)
    assert b"\0" not in kept[0][:: mmap.PAGESIZE]  # the same bytes, moved
    assert not regions.waiting


def test_small_regions_and_regions_mapped_before_stay_as_they_are(monkeypatch):
    _huge_pages_possible()
    monkeypatch.setattr(model_pages, "MOVE_AFTER_S", 0.0)
    regions, earlier, kept = model_pages.LargeRegions(), _touched(model_pages.LARGE + (8 << 20)), []
    regions.load(lambda: kept.append(_touched(model_pages.LARGE // 2)))  # the kernel may merge it into `earlier`
    with regions.scoring():
        pass
    assert _huge_kib(kept[0]) == 0
    assert _huge_kib(earlier) == 0


def test_only_new_memory_counts_even_where_the_kernel_merged_it_into_old():
    old = {(100, 200), (300, 400)}
    assert model_pages.new_ranges(old, {(50, 200), (300, 400), (500, 600)}) == [(50, 100), (500, 600)]
    assert model_pages.new_ranges(old, {(100, 450)}) == [(200, 300), (400, 450)]
    assert model_pages.new_ranges(old, old) == []


def test_a_region_no_longer_mapped_is_left_alone(monkeypatch):
    monkeypatch.setattr(model_pages, "MOVE_AFTER_S", 0.0)
    moved = []
    monkeypatch.setattr(model_pages, "_collapse", lambda start, end: moved.append((start, end)) or end - start)
    monkeypatch.setattr(model_pages, "_anonymous_regions", lambda: {(0, 1 << 30)})
    regions = model_pages.LargeRegions()
    regions.waiting |= {(4 << 20, 40 << 20), (2 << 30, 3 << 30)}  # the second: a model loaded, checked and freed
    with regions.scoring():
        pass
    assert moved == [(4 << 20, 40 << 20)] and not regions.waiting


def test_without_proc_the_load_is_all(monkeypatch, tmp_path):
    monkeypatch.setattr(model_pages, "MAPS", tmp_path / "no-such-file")
    monkeypatch.setattr(model_pages, "MOVE_AFTER_S", 0.0)
    regions, calls = model_pages.LargeRegions(), []
    assert regions.load(lambda: calls.append(1) or 7) == 7
    with regions.scoring():
        pass
    assert calls == [1] and not regions.waiting
