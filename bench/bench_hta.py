"""HolisticTraceAnalysis (HTA) as the baseline of `inductor-perf summary`: a throwaway venv, and the
command that loads one trace and computes its temporal breakdown.

The venv lives under ~/.cache/inductor_perf-bench/hta (reused when present; `python -m venv` +
`pip install HolisticTraceAnalysis`, which pulls pandas, plotly, ...). It is never imported here:
HTA runs in its own interpreter, so its dependencies cannot touch ours.

    python bench/bench_hta.py TRACE.json     # ensure the venv, then run HTA once and print its result
"""

from __future__ import annotations

import os
import subprocess
import sys

VENV = os.path.join(os.path.expanduser("~"), ".cache", "inductor_perf-bench", "hta")
PYTHON = os.path.join(VENV, "bin", "python")

# What HTA does for "load + temporal breakdown": TraceAnalysis parses the rank's file (in a forked
# multiprocessing pool of one process), aligns and filters it; get_temporal_breakdown sums idle,
# compute and non-compute GPU time per rank. trace_files maps rank -> file (trace_dir must exist).
CHILD = r"""
import os, sys, time
t0 = time.perf_counter()
from hta.trace_analysis import TraceAnalysis
path = sys.argv[1]
analyzer = TraceAnalysis(trace_files={0: path}, trace_dir=os.path.dirname(os.path.abspath(path)))
df = analyzer.get_temporal_breakdown(visualize=False)
print(df.to_string(), file=sys.stderr)
print(f"hta: {time.perf_counter() - t0:.2f} s in-process", file=sys.stderr)
"""


def installed() -> bool:
    """Whether the venv holds an importable HTA."""
    if not os.path.exists(PYTHON):
        return False
    r = subprocess.run([PYTHON, "-c", "import hta.trace_analysis"], capture_output=True, timeout=120)
    return r.returncode == 0


def version() -> str:
    r = subprocess.run([PYTHON, "-c", "import importlib.metadata as m; print(m.version('HolisticTraceAnalysis'))"],
                       capture_output=True, text=True, timeout=60)
    return r.stdout.strip() or "unknown"


def ensure(install: bool = True) -> tuple[bool, str]:
    """(available, note): HTA importable from the venv, installing it first when ``install``.

    Never raises: a failed install (no network, no wheel for this Python) is a note for the doc."""
    if installed():
        return True, f"HolisticTraceAnalysis {version()} from the cached venv {VENV}"
    if not install:
        return False, f"HTA skipped: no cached venv at {VENV} (quick mode does not install it; `make bench` does)"
    try:
        if not os.path.exists(PYTHON):
            subprocess.run([sys.executable, "-m", "venv", VENV], check=True, capture_output=True, timeout=300)
        r = subprocess.run([PYTHON, "-m", "pip", "install", "-q", "--disable-pip-version-check",
                            "HolisticTraceAnalysis"], capture_output=True, text=True, timeout=1200)
    except (OSError, subprocess.SubprocessError) as e:
        return False, f"HTA skipped: creating its venv failed ({type(e).__name__}: {e})"
    if r.returncode != 0 or not installed():
        last = (r.stderr.strip().splitlines() or ["no output"])[-1]
        return False, f"HTA skipped: `pip install HolisticTraceAnalysis` failed ({last[:200]})"
    return True, f"HolisticTraceAnalysis {version()}, installed now into {VENV}"


def command(trace: str) -> list[str]:
    """The measured command: HTA's load + temporal breakdown of ``trace`` in a fresh interpreter."""
    return [PYTHON, "-c", CHILD, trace]


if __name__ == "__main__":
    ok, note = ensure()
    print(note)
    if ok and len(sys.argv) > 1:
        sys.exit(subprocess.call(command(sys.argv[1])))
