"""Parsing events from their bytes into the cost join (:func:`join_range`), keeping what rendering
needs of the kernels, which most augmented events are (:func:`render.hint_of`), so that they are
parsed once."""

from __future__ import annotations

from typing import Any

from ...costs.launch import KERNEL
from .render import Hint, hint_of


def join_range(raw: bytes, starts: Any, ends: Any, lo: int, hi: int, join: Any, base: int = 0,
               hints: dict[int, Hint] | None = None) -> bool:
    """Parse events ``lo..hi-1`` of the spans and feed them to ``join`` as events ``base + i``; False
    when one is not a JSON object (a split inside a string, NaN/Infinity...: the full path decides).
    With ``hints``: the :data:`render.Hint` of each device kernel whose args can be spliced goes
    there under its event number."""
    import orjson

    loads = orjson.loads
    index, cost, later = join.index, join.cost, join.flows_later  # join.add, one call less per event
    try:
        for i in range(lo, hi):
            s0, e0 = starts[i], ends[i]
            ev = loads(raw[s0:e0])
            if type(ev) is not dict:
                return False
            ph = ev.get("ph")
            if ph == "X":
                got = index(i + base, ev)
                if got is not None:
                    cost(i + base, ev, *got)
                    if got[0] == KERNEL and hints is not None:
                        # parsed here once: rendering needs only this of it (most kernels get augmented)
                        hint = hint_of(raw, ev, s0, e0)
                        if hint is not None:
                            hints[i + base] = hint
            elif ph == "s" or ph == "f":
                later.append(i + base)  # parsed again in finish() only if a kernel needs flows
    except orjson.JSONDecodeError:
        return False
    return True
