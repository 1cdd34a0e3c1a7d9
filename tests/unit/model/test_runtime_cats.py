"""One set of runtime categories (model.events.RUNTIME_CATS, matched by is_runtime in any case), read
by every stage that follows a launch's correlation id: the cost join (costs.launch), a diff's side
(comparison.kernels), the full summary (summary.idle) and the streaming summary's pass (its category
classes, which summary.stream.loop routes by)."""

from __future__ import annotations

import pytest

from inductor_perf.comparison.kernels import LAUNCH_EVENT, category_kind
from inductor_perf.costs.launch import RUNTIME, kind_of_category
from inductor_perf.model import events as evs
from inductor_perf.summary.idle import launching_threads
from inductor_perf.summary.kernels import ParsedEvent, select_kernels
from inductor_perf.summary.stream import loop
from inductor_perf.summary.stream.engine import _Pass

# Kineto's spellings (CUDA's runtime and driver API, ROCm's HIP runtime, Kineto before 2.0), in
# another case too: every reader lower-cases a category before looking it up
RUNTIME_SPELLINGS = ["cuda_runtime", "cuda_driver", "hip_runtime", "Runtime", "CUDA_RUNTIME"]
OTHERS = ["cpu_op", "user_annotation", "python_function", "gpu_user_annotation", "ac2g", "Trace"]


def _full_summary_launcher(cat: str):
    """The thread the full summary says launched a kernel whose correlation id is on an event of ``cat``."""
    launch = ParsedEvent("launch", cat, 1, 2, 0.0, 1.0, {"correlation": 9})
    kernel = ParsedEvent("k", "kernel", 0, 7, 2.0, 1.0, {"correlation": 9})
    tk = select_kernels([launch, kernel])
    return launching_threads(tk)[0][id(tk.kernels[0])]


@pytest.mark.parametrize("cat", RUNTIME_SPELLINGS + OTHERS)
def test_every_reader_takes_the_same_runtime_calls(cat):
    runtime = cat in RUNTIME_SPELLINGS
    assert evs.is_runtime(cat) is runtime
    assert (kind_of_category(cat) == RUNTIME) is runtime                # the cost join
    assert (category_kind(cat) == LAUNCH_EVENT) is runtime              # a diff's side
    assert (_full_summary_launcher(cat) == (1, 2)) is runtime            # the full summary
    assert (loop._route(cat, _Pass())[1] == loop._P_RUNTIME) is runtime  # the streaming summary


def test_streaming_pass_keeps_the_launching_thread_and_launch_time():
    seen = _Pass()
    seen.add(5, {"ph": "X", "cat": "Runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 2, "ts": 0.0,
                 "dur": 1.0, "args": {"correlation": 9}})
    # the launching thread, the launch's start, and its event index (the op x shape table's way back)
    assert seen.by_corr == {9: ((1, 2), 0.0, 5)}


@pytest.mark.parametrize("cat, name, replay", [
    ("cuda_runtime", "cudaGraphLaunch", True), ("cuda_driver", "cuGraphLaunch", True),
    ("Runtime", "cudaGraphLaunch_v10000", True), ("cuda_runtime", "hipGraphLaunch", True),
    ("hip_runtime", "hipGraphLaunch", False), ("cuda_runtime", "cudaLaunchKernel", False),
    ("cpu_op", "cudaGraphLaunch", False)])
def test_every_summary_reader_sees_the_same_graph_replays(cat, name, replay):
    """The note on CUDA graph replays: the full summary and the streaming pass (both its loop and its
    methods) flag the same runtime calls."""
    assert evs.replays_cuda_graph(cat, name) is replay
    launch = ParsedEvent(name, cat, 1, 2, 0.0, 1.0, {"correlation": 9})
    kernel = ParsedEvent("k", "kernel", 0, 7, 2.0, 1.0, {"correlation": 9})
    assert launching_threads(select_kernels([launch, kernel]))[1] is replay
    seen = _Pass()
    seen.add(0, {"ph": "X", "cat": cat, "name": name, "pid": 1, "tid": 2, "ts": 0.0, "dur": 1.0, "args": {}})
    assert seen.graph_launches is replay
    fused = _Pass()
    loop._take_host(fused, (1, 2), name, cat, 0.0, 1.0, {}, loop._route(cat, fused)[1], 0)
    assert fused.graph_launches is replay
