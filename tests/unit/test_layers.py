"""The pure core imports neither Ray nor pyarrow; the CLI starts without either."""

import subprocess
import sys

import pytest

CORE = ["sharding", "arrays", "checkpoint", "run_config", "contract", "retry", "status", "plan", "job_context", "jobenv"]


@pytest.mark.parametrize("modules", [CORE, ["cli", "app", "options", "entrypoint"]])
def test_imports_stay_light(modules):
    code = (f"import sys, importlib; [importlib.import_module('curator_array.' + m) for m in {modules!r}]; "
            "heavy = sorted(m for m in ('ray', 'pyarrow', 'numpy', 'requests') if m in sys.modules); print(heavy)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]", f"{modules} pulled in {out.strip()}"
