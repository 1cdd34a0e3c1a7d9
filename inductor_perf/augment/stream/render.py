"""Rendering augmented events as bytes: copy the input between augmented events as it is, splice our
args into an event whose args come last, re-encode the others (:func:`emit`)."""

from __future__ import annotations

import re
import zlib
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Iterable, Mapping

from ...costs.comm import comm_args
from ...devices.peaks import dtype_peak
from ...model import events as evs
from ...model.event_cost import AugmentStats, EventCost
from ...roofline.point import INLINE_RANGE, binding_roof, inline_pcts, inline_takes
from ...traces import files as tf
from ..args import args_for, augment_event, device_bandwidth, roof_bandwidth, static_args

if TYPE_CHECKING:  # pragma: no cover
    from .progress import Progress

_ARGS_MEMBER = re.compile(rb'"args"\s*:\s*\{')
_ARGS_LAST = re.compile(rb'"args"\s*:\s*\{[^}]*(\})\s*\}')
"""An ``"args"`` member whose object holds no "}", then only whitespace up to the event's closing
brace: how Kineto writes every event (:func:`args_close`'s usual case)."""
_ADDED_KEYS = frozenset(evs.ADDED_ARG_KEYS)


class Pieces(list):
    """Stands in for a file in :func:`emit`: keeps what is written (views of the input and
    encoded args), so that its length is known before any of it is written."""

    write = list.append


def crc_and_size(pieces: list, crc: int = 0) -> tuple[int, int]:
    """CRC-32 of the pieces' bytes, continued from ``crc``, and their total length."""
    for p in pieces:
        crc = zlib.crc32(p, crc)
    return crc, sum(map(len, pieces))


@dataclass(frozen=True)
class WorkerDevice:
    """Stands in for the device in the worker's :func:`emit`: the bandwidths
    (:func:`augment.args.roof_bandwidth`) and, looked up by the parent, the peak of each
    ``(dtype, matmul)`` key of the costs it renders. (A device's roofs are
    :class:`roofline.roofs.Roofs`.)"""

    mem_bandwidth_gbs: float | None
    peaks: dict[tuple[Any, bool], float | None]
    host_link_gbs: float | None = None
    interconnect_gbs: float | None = None


def worker_device(device: Any, costs: Iterable[EventCost]) -> WorkerDevice | None:
    """The :class:`WorkerDevice` of ``device`` for ``costs`` (None without a device)."""
    if device is None:
        return None
    keys = {(c.dtype, c.matmul_flops > 0) for c in costs if c.comm is None}
    return WorkerDevice(device_bandwidth(device), {k: dtype_peak(device, k[0], k[1]) for k in keys},
                        roof_bandwidth(device, "host_link"), roof_bandwidth(device, "interconnect"))


def args_inline(head: dict[str, Any], tail: dict[str, Any], flops: int, nbytes: int, dur_us: float,
                peak_tflops: float, bandwidth_gbs: float, roof: str | None) -> dict[str, Any]:
    """:func:`augment.args.args_for` by the inline roofline (:func:`roofline.point.inline_pcts`), for
    a cost :func:`roofline.point.inline_takes` and ``dur_us`` within :data:`INLINE_RANGE`; ``roof``
    from :func:`roofline.point.binding_roof` (tests/unit/augment/test_fast_path.py checks it against
    args_for on a sweep)."""
    a = dict(head)
    a.update(achieved_inline(flops, nbytes, dur_us, peak_tflops, bandwidth_gbs, roof))
    a.update(tail)
    return a


def achieved_inline(flops: int, nbytes: int, dur_us: float, peak_tflops: float, bandwidth_gbs: float,
                    roof: str | None) -> dict[str, Any]:
    """The args of :func:`args_inline` that depend on the event: the achieved rates and fractions of
    peak, and the bound."""
    flops_pct, bandwidth_pct, bound = inline_pcts(flops, nbytes, dur_us, peak_tflops, bandwidth_gbs, roof)
    # the achieved rates as args_for writes them
    return {evs.ACHIEVED_TFLOPS: flops / (dur_us * 1e6), evs.ACHIEVED_GBPS: nbytes / (dur_us * 1e3),
            evs.ACHIEVED_FLOPS_PCT: flops_pct, evs.ACHIEVED_BANDWIDTH_PCT: bandwidth_pct, evs.ROOFLINE_BOUND: bound}


Hint = tuple  # (close, cat, dur, args_nonempty)
"""What rendering needs of an event whose args can be spliced (:func:`hint_of`), taken while the
event is parsed for the join so that it is not parsed again to be written: where its args' closing
brace is (:func:`args_close`), its ``cat`` and ``dur`` values, and whether its args are non-empty."""


def hint_of(raw: bytes, ev: dict, s0: int, e0: int) -> Hint | None:
    """The :data:`Hint` of event ``ev`` (``raw[s0:e0]``), or None when its args cannot be spliced
    (rendering then parses it again and re-encodes it)."""
    close = args_close(raw, ev, s0, e0)
    return None if close < 0 else (close, ev.get("cat"), ev.get("dur"), bool(ev["args"]))


def args_close(raw: bytes, ev: dict, s0: int, e0: int) -> int:
    """Where the closing brace of the args dict of event ``ev`` (``raw[s0:e0]``) is in ``raw``, or -1
    unless the args are a dict written as the event's last member (then our args can be spliced
    in there)."""
    args = ev.get("args")
    if type(args) is not dict or next(reversed(ev)) != "args" or not _ADDED_KEYS.isdisjoint(args):
        return -1
    # The usual case in one search and one match: the last "args" key starts the event's last member,
    # which _args_close_checked would accept without parsing it (the same answer in about half the
    # time: this runs for every kernel of a trace).
    k = raw.rfind(b'"args"', s0, e0)
    if k > s0 and raw[k - 1] != 0x5C:
        m = _ARGS_LAST.fullmatch(raw, k, e0)
        if m is not None:
            return m.start(1)
    return _args_close_checked(raw, args, s0, e0)


def _args_close_checked(raw: bytes, args: dict, s0: int, e0: int) -> int:
    """:func:`args_close` after its checks of the event, for any layout of its text."""
    import orjson

    close = raw.rfind(b"}", s0, e0 - 1)
    if close <= s0 or raw[close + 1:e0 - 1].strip():
        return -1
    # The object ending there must be the value of a last `"args":` member.
    k = raw.rfind(b'"args"', s0, close)
    m = _ARGS_MEMBER.match(raw, k) if k > s0 and raw[k - 1] != 0x5C else None
    if m is None:
        return -1
    if raw.find(b"}", m.end(), close) < 0:
        # A key (its quote is not escaped, and a string's closing quote is never followed by a
        # letter) whose object holds no "}" before `close` ends at `close`: it is the event's last
        # member, the args JSON keeps.
        return close
    # Else it must parse to the same dict (a nested or duplicated "args" key fails this and the
    # event is re-encoded instead).
    try:
        same = orjson.loads(raw[m.end() - 1:close + 1]) == args
    except orjson.JSONDecodeError:
        return -1
    return close if same else -1


def emit(raw: bytes, starts: Any, ends: Any, todo: list[int], costs: Mapping[int, EventCost], device: Any,
          astats: AugmentStats, out: Any, at: int, show: "Progress | None",
          pre: Mapping[int, Hint] | None = None, base: int = 0,
          labels: Mapping[int, Mapping[str, Any]] | None = None) -> int:
    """Write the augmented events ``todo`` (ascending indices; each in ``costs`` or ``labels``) to
    ``out`` with the input bytes between them, starting from ``raw[at:]`` (``at`` -1: from the first
    event's start); return where the input bytes still to copy begin. ``pre`` has the :data:`Hint`
    of some events (taken by :func:`parse.join_range`): those are not parsed again; the spans of
    event ``i`` are at ``i - base``. An event's label (``launch_op``, ``not_costed``) follows its
    cost's args, as in :func:`augment.args.augment_event`."""
    # The worker's device is a WorkerDevice: every peak it asks for is in the cache already.
    peak_cache: dict[tuple[Any, bool], float | None] = dict(device.peaks) if type(device) is WorkerDevice else {}
    bandwidth = device_bandwidth(device)
    enc = tf.json_encoder()
    from orjson import dumps  # for the achieved numbers alone: floats and a str, which it always encodes

    static: dict[int, tuple] = {}  # id(cost) -> its _hbm_entry, which holds the cost
    on_device: dict[str, bool] = {}  # event category -> whether the device's roofs apply to it
    scope_cats = evs.CPU_SCOPE_CATS
    labels = labels or {}
    label_bodies: dict[int, tuple[Mapping[str, Any], bytes]] = {}  # the labels are shared dicts: encoded once

    def spliced(cat: Any, dur: Any, has_args: bool, cost: EventCost | None, label: Mapping[str, Any] | None
                ) -> bytes:
        """Our args for an event (its ``cat`` and ``dur`` values, whether its args are non-empty) as
        the bytes to insert before its args' closing brace."""
        if cost is None:
            astats.events_labelled += 1
            got = label_bodies.get(id(label))
            if got is None:
                got = label_bodies[id(label)] = (label, enc(label)[1:-1])
            inside = got[1]
        elif cost.comm is not None or (cost.memory_roof is not None and cost.memory_roof != "hbm"):
            inside = enc(other_roof_args(cat, dur, cost, label, device, astats))[1:-1]
        else:
            inside = on_hbm(cat, dur, cost, label)
        # after a comma unless the event's args are empty
        return b"," + inside if has_args else inside

    def on_hbm(cat: Any, dur: Any, cost: EventCost, label: Mapping[str, Any] | None) -> bytes:
        """The args of a cost measured against the device's peaks and memory bandwidth, encoded
        without the braces. What does not depend on the event is worked out and encoded once per
        cost (and label): the same bytes as encoding the whole dict, since orjson writes
        ``{"k":v,...}`` compactly."""
        entry = static.get(id(cost))
        if entry is None:
            entry = static[id(cost)] = _hbm_entry(cost, device, peak_cache, bandwidth, enc)
        _c, head, tail, flops, nbytes, head_b, peak, roof, inline, tails = entry
        use_device = on_device.get(cat) if type(cat) is str else None
        if use_device is None:
            use_device = device is not None and not (isinstance(cat, str) and cat.lower() in scope_cats)
            if type(cat) is str and len(on_device) < 256:
                on_device[cat] = use_device
        if not use_device:
            peak = None
        elif peak is not None:
            astats.peaks_known = True
        if type(dur) is not float or not dur > 0.0 or dur - dur != 0.0:
            dur = evs.number(dur)
            if dur is None or dur <= 0:
                astats.nonpositive_dur += 1
                dur = None
        astats.events_augmented += 1
        if inline and use_device and dur is not None and INLINE_RANGE[0] <= dur <= INLINE_RANGE[1]:
            tail_b = tails.get(id(label))
            if tail_b is None:
                after = {**tail, **label} if label else tail  # label keys are never cost keys
                tail_b = tails[id(label)] = b"," + enc(after)[1:-1] if after else b""
            return head_b + dumps(achieved_inline(flops, nbytes, dur, peak, bandwidth, roof))[1:-1] + tail_b
        a = args_for(head, tail, flops, nbytes, dur, peak, bandwidth if use_device else None)
        if label:
            a.update(label)
        return enc(a)[1:-1]

    def reencoded(ev: dict, cost: EventCost | None, label: Mapping[str, Any] | None) -> bytes:
        return enc(augment_event(ev, cost, device, True, peak_cache, bandwidth, astats, label))

    return _write_events(raw, starts, ends, todo, costs, labels, out, at, show, pre, base, spliced, reencoded)


def _hbm_entry(cost: EventCost, device: Any, peak_cache: dict[tuple[Any, bool], float | None],
               bandwidth: float | None, enc: Callable[[Any], bytes]) -> tuple:
    """What :func:`emit` needs of ``cost`` to write it on any event measured against ``device``'s
    peaks and memory ``bandwidth``: its static args (and those before the achieved ones encoded by
    ``enc``), its peak (looked up once per key in ``peak_cache``), the roof that binds it, whether the
    inline roofline takes it (given a duration in range), and a dict for its encoded tails by label."""
    head, tail = static_args(cost)
    flops, nbytes = int(cost.flops), int(cost.bytes_read) + int(cost.bytes_written)
    peak = roof = None
    if device is not None:
        key = (cost.dtype, cost.matmul_flops > 0)
        if key not in peak_cache:
            peak_cache[key] = dtype_peak(device, cost.dtype, cost.matmul_flops > 0)
        peak = peak_cache[key]
    # the inline roofline where it gives classify's answer; anything else goes through classify itself
    inline = inline_takes(flops, nbytes, peak, bandwidth)
    if inline:
        roof = binding_roof(flops, nbytes, peak, bandwidth)
    return (cost, head, tail, flops, nbytes, enc(head)[1:-1] + b",", peak, roof, inline, {})


def _write_events(raw: bytes, starts: Any, ends: Any, todo: list[int], costs: Mapping[int, EventCost],
                  labels: Mapping[int, Mapping[str, Any]], out: Any, at: int, show: "Progress | None",
                  pre: Mapping[int, Hint] | None, base: int, spliced: Any, reencoded: Any) -> int:
    """:func:`emit`'s walk over the events: ``spliced`` gives the bytes to insert into an event
    whose args come last, ``reencoded`` the whole of any other event."""
    import orjson

    loads = orjson.loads
    no_costs: dict[int, EventCost] = {}
    # Everything between two augmented events is copied from the input as it is. An augmented
    # event whose args come last gets our args spliced in before the args' closing brace (same
    # JSON as re-encoding it, without copying the event); others are re-encoded one at a time
    # (orjson's output keeps its ~4 KB buffer alive, so holding 150k of them would cost more
    # than the whole input).
    view = memoryview(raw)
    if at < 0:
        at = starts[todo[0] - base] if todo else 0
    for done, i in enumerate(todo):
        s0, e0 = starts[i - base], ends[i - base]
        got = pre.get(i) if pre else None
        if got is None:
            ev = loads(raw[s0:e0])
            got = hint_of(raw, ev, s0, e0)
        cost = costs.get(i, no_costs)
        if cost is no_costs:
            cost = None
        label = labels.get(i)
        if got is not None:
            close = got[0]
            out.write(view[at:close])
            out.write(spliced(got[1], got[2], got[3], cost, label))
            at = close
        else:
            out.write(view[at:s0])
            # a tight copy: orjson's output keeps its ~4 KB buffer, and Pieces holds what it is given
            out.write(memoryview(reencoded(ev, cost, label)).tobytes())
            at = e0
        if show is not None and done % 20_000 == 0:
            show("writing", done / len(todo))
    view.release()
    return at


def other_roof_args(cat: Any, dur: Any, cost: EventCost, label: Mapping[str, Any] | None, device: Any,
                    astats: AugmentStats) -> dict[str, Any]:
    """The args of a collective or a copy measured against another roof than HBM (what
    :func:`augment.args.augment_event` adds for them), for an event of these ``cat`` and ``dur``
    values."""
    use_device = device is not None and not (isinstance(cat, str) and cat.lower() in evs.CPU_SCOPE_CATS)
    dur = evs.number(dur)
    if dur is None or dur <= 0:
        astats.nonpositive_dur += 1
        dur = None
    astats.events_augmented += 1
    roof = "interconnect" if cost.comm is not None else cost.memory_roof
    bw = roof_bandwidth(device, roof) if use_device else None
    if cost.comm is not None:
        a = comm_args(cost.comm, dur, bw)
    else:
        head, tail = static_args(cost)
        a = args_for(head, tail, 0, int(cost.bytes_read) + int(cost.bytes_written), dur, None, bw)
    if label:
        a.update(label)
    return a
