"""Importing inductor_perf must stay cheap: torch.compile loads our entry point lazily, and users
import the package in processes that never compile."""

from __future__ import annotations

import json
import subprocess
import sys

CHILD = r"""
import json, sys
import torch
baseline = "torch._inductor" in sys.modules
import inductor_perf
after_import = "torch._inductor" in sys.modules
# the light public names (data model, markers, errors) load without Inductor too
inductor_perf.KernelTag, inductor_perf.kernel_table, inductor_perf.OptionsError
import inductor_perf.model.markers, inductor_perf.tagging.instrument, inductor_perf.config
after_names = "torch._inductor" in sys.modules
print("JSON:" + json.dumps({"baseline": baseline, "after_import": after_import,
                            "after_names": after_names, "cuda": torch.cuda.is_initialized()}))
"""


def test_import_is_lean() -> None:
    proc = subprocess.run([sys.executable, "-c", CHILD], capture_output=True, text=True, timeout=120)
    line = next((ln for ln in proc.stdout.splitlines() if ln.startswith("JSON:")), None)
    assert line is not None, proc.stderr[-3000:]
    r = json.loads(line[5:])
    assert r["baseline"] is False  # else this test could not tell anything
    assert r["after_import"] is False, "import inductor_perf imported torch._inductor"
    assert r["after_names"] is False, "a light public name imported torch._inductor"
    assert r["cuda"] is False, "import inductor_perf initialized CUDA"
