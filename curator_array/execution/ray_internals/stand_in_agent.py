"""Holds the place of a Ray agent this node never uses, for as long as its raylet lives.

The raylet insists on starting its two agents and stops the node when one exits. On a
node of ours neither serves anything: the dashboard agent runs minimal (no dashboard
dependencies, so no metrics and no ports), and the runtime-env agent is asked only for
runtime environments, which no stage of ours can request (the image is the
environment). Each real agent costs about 50 MiB and a second of CPU importing itself;
this one costs about 3 MiB and nothing. See ``launcher.stand_in_agents``.

Run by path with ``python -I -S`` (it imports nothing beyond the interpreter's core),
with whatever arguments the raylet adds. It ends on SIGTERM, as the node's stop sends,
and by itself once the raylet that started it is gone, so a SIGKILLed raylet leaves
nothing behind. The raylet names itself in ``RAY_RAYLET_PID``: a stand-in that only
started running after its raylet died (a loaded node) would otherwise take whoever
adopted it for its raylet, and wait forever.
"""

import os
import time

POLL_S = 0.5


def main() -> None:
    raylet = int(os.environ.get("RAY_RAYLET_PID") or os.getppid())
    while os.getppid() == raylet:
        time.sleep(POLL_S)


if __name__ == "__main__":
    main()
