"""Parsing events from their bytes: into the cost join (:func:`join_range`) and, ahead of rendering,
the kernels most augmented events are (:func:`preparse`)."""

from __future__ import annotations

from typing import Any

from .render import args_close


def join_range(raw: bytes, starts: Any, ends: Any, lo: int, hi: int, join: Any, base: int = 0) -> bool:
    """Parse events ``lo..hi-1`` of the spans and feed them to ``join`` as events ``base + i``; False
    when one is not a JSON object (a split inside a string, NaN/Infinity...: the full path decides)."""
    import orjson

    loads = orjson.loads
    index, cost, later = join.index, join.cost, join.flows_later  # join.add, one call less per event
    try:
        for i in range(lo, hi):
            ev = loads(raw[starts[i]:ends[i]])
            if type(ev) is not dict:
                return False
            ph = ev.get("ph")
            if ph == "X":
                got = index(i + base, ev)
                if got is not None:
                    cost(i + base, ev, *got)
            elif ph == "s" or ph == "f":
                later.append(i + base)  # parsed again in finish() only if a kernel needs flows
    except orjson.JSONDecodeError:
        return False
    return True


def preparse(raw: bytes, starts: Any, ends: Any, indices: Any, base: int = 0) -> dict[int, tuple[dict, int]]:
    """``{i: (event, args_close(...))}`` for the events ``indices``: the worker does this for its
    kernels while it waits for the costs (most of them get augmented)."""
    import orjson

    loads = orjson.loads
    out = {}
    for i in indices:
        s0, e0 = starts[i - base], ends[i - base]
        ev = loads(raw[s0:e0])
        out[i] = (ev, args_close(raw, ev, s0, e0))
    return out
