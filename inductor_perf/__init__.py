"""inductor_perf: make torch.compile performance visible.

Use ``torch.compile(model, backend="inductor_perf")``; the backend is registered through the
``torch_dynamo_backends`` entry point, so no import is needed. Importing this package is cheap: it
does not import torch._inductor or initialize CUDA; names below load their module on first use.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

# public name -> module that defines it
_EXPORTS = {
    "inductor_perf_backend": "backend",
    "KernelTag": "model.tags",
    "NodeInfo": "model.tags",
    "GraphTags": "model.tags",
    "kernel_table": "model.tags",
    "graph_table": "model.tags",
    "profile": "capture.session",
    "CaptureResult": "capture.session",
    "InductorPerfError": "errors",
    "OptionsError": "errors",
    "UnsupportedTorchError": "errors",
    "TraceFormatError": "errors",
    "DeviceSpecError": "errors",
    "DeviceSpec": "devices.spec",
    "lookup_device": "devices.resolve",
    "resolve_device": "devices.resolve",
    "compare": "comparison.runner",
    "Comparison": "comparison.rows",
    "diff_traces": "comparison.runner",
    "ranks_view": "ranks.files",
    "summarize": "report.notebook",
    "TraceSummary": "report.notebook",
}

__all__ = ["__version__", *_EXPORTS]

if TYPE_CHECKING:  # pragma: no cover
    from .backend import inductor_perf_backend
    from .capture.session import CaptureResult, profile
    from .devices.resolve import DeviceSpec, lookup_device, resolve_device
    from .errors import (DeviceSpecError, InductorPerfError, OptionsError, TraceFormatError,
                         UnsupportedTorchError)
    from .model.tags import GraphTags, KernelTag, NodeInfo, graph_table, kernel_table
    from .ranks.files import ranks_view
    from .report.notebook import TraceSummary, summarize


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'inductor_perf' has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
