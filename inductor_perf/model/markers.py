"""The marker formats: one profiler range per compiled-graph call, naming the graph instance; and one
around each of the user's calls that can wait for the device, naming the user's line.

The marker lets a trace's kernel events join exactly to their compile-time tags: forward and
backward, repeated kernels, identical subgraphs, graph breaks and cache hits all get distinct
instance ids, and under dynamic shapes the marker carries the call's size-symbol values.

Torch-free: the offline joins (:mod:`inductor_perf.costs.from_tags`), the diff
(:mod:`inductor_perf.comparison.units`) and the capture's window read markers from JSON; the wrapper
that emits them around each call is :mod:`inductor_perf.tagging.instrument`.

The call markers give a host-device sync outside compiled code (``loss.item()`` in the training loop),
or a copy from pageable memory (``batch.cuda()``), the line that made it, which a trace recorded
without ``with_stack=True`` has no other way to say (:mod:`inductor_perf.summary.signals` reads them;
:mod:`inductor_perf.capture.sync_calls` emits them).
"""

from __future__ import annotations

import re
from typing import Mapping

MARKER_PREFIX = "## inductor_perf graph="
_MARKER_RE = re.compile(r"^## inductor_perf graph=(\d+) (fwd|bwd)(?: sym=([^ ]*))? ##$")


def marker_name(instance_id: int, is_backward: bool, symbols: Mapping[str, int] | None = None) -> str:
    """The profiler event name for one call of a compiled graph.

    >>> marker_name(3, False, {"s0": 8})
    '## inductor_perf graph=3 fwd sym=s0:8 ##'
    """
    name = f"{MARKER_PREFIX}{instance_id} {'bwd' if is_backward else 'fwd'}"
    if symbols:
        name += " sym=" + ",".join(f"{k}:{v}" for k, v in sorted(symbols.items()))
    return name + " ##"


def parse_marker(name: str) -> tuple[int, bool, dict[str, int]] | None:
    """(instance id, is_backward, symbol values) of a marker event name, or None.

    >>> parse_marker('## inductor_perf graph=3 bwd sym=s0:8,s1:2 ##')
    (3, True, {'s0': 8, 's1': 2})
    """
    if not name.startswith(MARKER_PREFIX):
        return None
    m = _MARKER_RE.match(name)
    if not m:
        return None
    symbols: dict[str, int] = {}
    if m.group(3):
        for item in m.group(3).split(","):
            key, _, value = item.partition(":")
            try:
                symbols[key] = int(value)
            except ValueError:
                return None
    return int(m.group(1)), m.group(2) == "bwd", symbols


# --- The user's calls that can wait for the device -------------------------------------------------------
CALL_PREFIX = "## inductor_perf call="
_CALL_RE = re.compile(r"^## inductor_perf call=(\S+) at=(.+:\d+) ##$")
LIBRARY_PATHS = ("/torch/", "site-packages", "dist-packages", "<built-in", "<frozen", "/lib/python")
"""Path parts of code that is not the user's (torch, installed packages, the standard library): a
sync's line is the innermost frame outside them."""


def is_library_path(path: str) -> bool:
    """Whether a code file is torch's, an installed package's or Python's own, not the user's."""
    return any(p in path for p in LIBRARY_PATHS)


def call_marker_name(what: str, source: str) -> str:
    """The profiler range the capture puts around one of the user's calls that can wait for the device
    (:mod:`inductor_perf.capture.sync_calls`): the call and the user's line.

    >>> call_marker_name("item", "/w/train.py:42")
    '## inductor_perf call=item at=/w/train.py:42 ##'
    """
    return f"{CALL_PREFIX}{what} at={source} ##"


def parse_call_marker(name: str) -> tuple[str, str] | None:
    """(call, ``file.py:LINE``) of a call marker's name, or None.

    >>> parse_call_marker('## inductor_perf call=item at=/w/my train.py:42 ##')
    ('item', '/w/my train.py:42')
    """
    if not name.startswith(CALL_PREFIX):
        return None
    m = _CALL_RE.match(name)
    return (m.group(1), m.group(2)) if m else None
