"""Everything curator-array borrows from Ray's private API, behind one face.

A private cluster for one array element starts faster and lighter than ``ray start`` makes
it (``launcher``: the lean node, its stand-in agents), Ray Data runs on it without its
helper actors (``data``), and one process may talk to several clusters in turn (``auth``).
Each reaches into Ray's internals, which change between releases without notice, so:

* every such use lives in this subpackage, and nothing else in the package imports Ray's
  private modules (a test keeps that true);
* the rest of the package uses only what this module exports;
* these uses are tried only on the Ray releases the test suite has passed on
  (``TESTED_RAY``, the same range ``pyproject.toml`` allows). On any other release the run
  says so once, in its log, and takes Ray's public path: ``ray start --block``, Ray Data's
  own helper actors, auth read when Ray first starts. That costs start-up time, never
  correctness. ``make test-newest`` runs the tests of this layer on the newest Ray.

Where a tested release lacks something after all, each use falls back on its own, the same way.
"""

from __future__ import annotations

import logging
from functools import lru_cache

logger = logging.getLogger(__name__)

# [lowest, above the highest): the Ray releases the test suite passed on (pyproject.toml's bound).
TESTED_RAY = ((2, 60), (2, 61))
# The launcher every node of a private cluster runs (``python -m``), lean or not; what it
# tells the driver: a ready file in its temp dir once the node is registered, and this notice
# in its log when it is ``ray start --block`` instead.
LAUNCHER_MODULE = f"{__name__}.launcher"
READY_FILE = "head-ready"
FALLBACK_NOTICE = "using `ray start --block` instead"


def release(version: str) -> tuple[int, ...]:
    """The numeric release of a version string (``2.60.0rc1`` → (2, 60, 0))."""
    parts = []
    for piece in version.split("."):
        digits = "".join(c for c in piece[: len(piece) - len(piece.lstrip("0123456789"))] or "0")
        parts.append(int(digits or 0))
        if not piece.isdigit():
            break
    return tuple(parts)


def in_tested_range(version: str) -> bool:
    low, high = TESTED_RAY
    return low <= release(version) < high


@lru_cache(maxsize=1)
def private_api_allowed() -> bool:
    """Whether the installed Ray is one the private uses were tested on; says once when not."""
    import ray

    if in_tested_range(ray.__version__):
        return True
    low, high = (".".join(map(str, bound)) for bound in TESTED_RAY)
    logger.warning("Ray %s is outside the releases curator-array was tested on (>=%s, <%s): using Ray's public "
                   "path (slower start-up, the same results)", ray.__version__, low, high)
    return False


def reload_ray_auth() -> None:
    """Make an already-imported Ray re-read RAY_AUTH_* (it caches them on first use).

    Needed when one process talks to several clusters in turn, each with its own token.
    """
    if not private_api_allowed():
        return
    try:
        from ray._raylet import AuthenticationTokenLoader, Config
    except ImportError:  # a Ray without these hooks: the environment is read at init
        return
    Config.initialize("")
    AuthenticationTokenLoader.instance().reset_cache()


def without_helper_actors(enabled: bool = True):
    """While inside, datasets of this process start none of Ray Data's helper actors (``data``)."""
    from .data import without_helper_actors as swapped

    return swapped(enabled and private_api_allowed())


def quiet_progress_notice() -> None:
    """Keep Ray Data's "Progress bars disabled" hint out of the user's log (``data``)."""
    from .data import quiet_progress_notice as quiet

    quiet()
