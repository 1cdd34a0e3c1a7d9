"""The marker format: one profiler range per compiled-graph call, naming the graph instance.

The marker lets a trace's kernel events join exactly to their compile-time tags: forward and
backward, repeated kernels, identical subgraphs, graph breaks and cache hits all get distinct
instance ids, and under dynamic shapes the marker carries the call's size-symbol values.

Torch-free: the offline joins (:mod:`inductor_perf.costs.from_tags`), the diff
(:mod:`inductor_perf.comparison.units`) and the capture's window read markers from JSON; the wrapper
that emits them around each call is :mod:`inductor_perf.tagging.instrument`.
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
