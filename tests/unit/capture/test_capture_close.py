"""Ending the env-var window (``_Window.close``) turns off the host's collection only: on a GPU,
turning CUDA collection off made the Kineto of torch 2.11 lose every device kernel and runtime call
recorded before it (an H200 capture of transformers' GPT-2 kept 0 of its 230 kernels' device events;
docs/gpu.md). The device side records on until the profiler stops, and the window's shaping drops
what was launched after the window (tests/unit/capture/test_capture_window.py)."""

from __future__ import annotations

from torch.profiler import ProfilerActivity

from inductor_perf.capture.session import _Window


class _Profiler:
    def __init__(self) -> None:
        self.toggled: list = []

    def toggle_collection_dynamic(self, enable: bool, activities: list) -> None:
        self.toggled.append((enable, list(activities)))


def _closed(activities: list) -> list:
    w = _Window("unused", None)
    w.prof, w.activities, w.collecting = _Profiler(), activities, True
    assert w.close()
    assert not w.collecting
    return w.prof.toggled


def test_closing_a_cpu_window_turns_the_host_off():
    assert _closed([ProfilerActivity.CPU]) == [(False, [ProfilerActivity.CPU])]


def test_closing_a_gpu_window_leaves_device_collection_on(monkeypatch):
    import torch

    monkeypatch.setattr(torch.cuda, "is_current_stream_capturing", lambda: False)
    monkeypatch.setattr(torch.cuda, "synchronize", lambda: None)
    assert _closed([ProfilerActivity.CPU, ProfilerActivity.CUDA]) == [(False, [ProfilerActivity.CPU])]
