"""A phase made of fresh arrays of GBs (``Phase.huge_pages = False``) runs without numpy's
huge-page advice; every other phase keeps it, and a user's ``NUMPY_MADVISE_HUGEPAGE`` wins."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from curator_array.run.huge_pages import HUGE_PAGE_ADVICE
from curator_array.run.phases import PHASES

# A fresh Python, as an element's process runs a phase: numpy imported before the phase or in it.
HUGE_PAGES = """
import os, sys
from curator_array.run.huge_pages import huge_page_advice
if sys.argv[1] == "before":
    import numpy
with huge_page_advice(sys.argv[2] == "True"):
    import numpy
    from numpy._core import multiarray
    inside = (os.environ.get("NUMPY_MADVISE_HUGEPAGE"), multiarray._get_madvise_hugepage())
print(*inside, os.environ.get("NUMPY_MADVISE_HUGEPAGE"), multiarray._get_madvise_hugepage())
"""


@pytest.mark.parametrize("numpy_imported", ["before", "in"])
def test_a_phase_can_go_without_numpys_huge_page_advice_unless_the_user_asks(numpy_imported):
    env = {key: value for key, value in os.environ.items() if key != HUGE_PAGE_ADVICE}

    def shown(wanted: bool, **more: str) -> list[str]:
        return subprocess.run([sys.executable, "-c", HUGE_PAGES, numpy_imported, str(wanted)], env={**env, **more},
                              capture_output=True, text=True, check=True).stdout.split()

    assert shown(False) == ["0", "False", "None", "True"], "without it inside, as before after"
    assert shown(True) == ["None", "True", "None", "True"]
    assert shown(False, NUMPY_MADVISE_HUGEPAGE="1") == ["1", "True", "1", "True"], "the user's value wins"


def test_only_the_paragraph_buckets_phase_goes_without_it():
    assert [phase.name for phase in PHASES if not phase.huge_pages] == ["paragraph_buckets"]
