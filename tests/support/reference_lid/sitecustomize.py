"""Started with every interpreter of a reference run whose ``PYTHONPATH`` holds this directory.

datatrove's executor starts its workers from a fork server, which patches made in the parent
never reach; with ``REFERENCE_LID_MODEL`` set, each of its processes points datatrove's
language filter at that model file before anything runs (``reference_fineweb.use_model``).
"""

import os

if os.environ.get("REFERENCE_LID_MODEL"):
    from tests.support.reference_fineweb import use_model

    use_model(os.environ["REFERENCE_LID_MODEL"])
