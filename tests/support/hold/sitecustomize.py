"""A test hook: hold one element of a later phase mid-work, so a test can SIGKILL it there.

On ``PYTHONPATH`` (fault tests put this directory there), Python imports this module at
start-up. With ``CURATOR_ARRAY_TEST_HOLD_ELEMENT=PHASE:INDEX:MARKER`` it wraps the phase
context's ``tick`` (called between the element's files): at that element's first tick (or
its tick number ``CURATOR_ARRAY_TEST_HOLD_AT``) it creates MARKER (holding its pid) and
sleeps, so the test knows the element is mid-work and kills it. Production code knows
nothing of this.
"""

import os

HOLD = os.environ.get("CURATOR_ARRAY_TEST_HOLD_ELEMENT", "")

if HOLD:
    import time
    from pathlib import Path

    from curator_array.run.lifecycle import PhaseContext

    phase, index, marker = HOLD.split(":", 2)
    at = int(os.environ.get("CURATOR_ARRAY_TEST_HOLD_AT", "0"))
    ticking = PhaseContext.tick

    def held_tick(self, done=0, of=0):
        ticking(self, done, of)
        if self.current == (phase, int(index)) and done >= at and not Path(marker).exists():
            Path(marker).write_text(str(os.getpid()))
            time.sleep(3600)

    PhaseContext.tick = held_tick
