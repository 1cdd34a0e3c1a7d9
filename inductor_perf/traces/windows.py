"""Reading a trace file's ``traceEvents`` array in windows of text for the streaming summary
(:mod:`inductor_perf.summary.stream.engine`) and the streamed side of a diff
(:mod:`inductor_perf.comparison.sides`): the file mapped read-only (:func:`mapped_text`; a ``.gz``
decompressed to a temporary file first), each window parsed as one array (by msgspec into event
envelopes, :func:`decode_envelopes`, or by orjson into dicts), its pages given back to the kernel
once parsed, and one event parsed again by its index when the cost join asks (:meth:`Windows.load`).
"""

from __future__ import annotations

import contextlib
import gzip
import mmap
import os
import re
import tempfile
import zlib
from functools import lru_cache
from typing import Any, Iterator

from . import files as tf
from ..errors import TraceFormatError

WINDOW_BYTES = 4 << 20
"""Text parsed at a time: bounds the memory of the parsed events (about 4x the text)."""


class LayoutError(Exception):
    """The text is not in the layout this engine reads: the caller loads the whole trace."""


# --- Decoding a window into envelopes --------------------------------------------------------------
MEMBERS = ("ph", "cat", "name", "pid", "tid", "ts", "dur")
"""The members of an event an envelope holds besides its ``args``: all that the readers of envelopes
(:func:`inductor_perf.summary.stream.loop.read_batch`) take of an event; the rest of it is read back from
the text when needed (:meth:`Windows.load`: a flow's id)."""


@lru_cache(maxsize=None)
def envelope_decoder() -> tuple[Any, Any, Any] | None:
    """(the decoder of a window's text as a list of envelopes, its error type, ``msgspec.UNSET``: the
    value of a member the event lacks); None without msgspec. An envelope holds :data:`MEMBERS`
    decoded and ``args`` as its undecoded text (a ``msgspec.Raw``: ``orjson.loads(memoryview(raw))``
    gives the dict ``orjson`` gives); every other member is skipped unread."""
    try:
        import msgspec
    except ImportError:
        return None
    unset = msgspec.UNSET
    envelope = msgspec.defstruct("Envelope", [*((m, Any, unset) for m in MEMBERS), ("args", msgspec.Raw, unset)],
                                 gc=False)
    return msgspec.json.Decoder(list[envelope]), msgspec.DecodeError, unset


def decode_envelopes(text: bytes) -> list[Any] | None:
    """The events of ``text`` (one JSON array) as envelopes (:func:`envelope_decoder`); None when
    msgspec is missing or the text does not decode so (not JSON, an element that is not an object):
    the caller parses it with orjson.

    Most of a Kineto window's text is what no reader of the pass takes (flows' ids, kernels' launch
    configurations...): skipped unread, and with only the complete events' args decoded afterwards,
    a window costs about half of parsing it whole (1.3 s of CPU against 2.5 s for the 1M-event bench
    trace's windows; docs/benchmarks.md).

    >>> [(e.ph, e.name, e.ts, bytes(e.args)) for e in decode_envelopes(
    ...     b'[{"ph": "X", "name": "k", "ts": 1.5, "grid": [1], "args": {"correlation": 3}}]')]
    [('X', 'k', 1.5, b'{"correlation": 3}')]
    """
    got = envelope_decoder()
    if got is None:
        return None
    decoder, error, _ = got
    try:
        return decoder.decode(text)
    except error:
        return None


# --- Reading the file in windows -------------------------------------------------------------------
def _array_text(raw: Any, pos: int, end: int) -> bytes:
    """``raw[pos:end]`` (elements of an array) as one JSON array, in one copy: ``b"[" + raw[pos:end] +
    b"]"`` makes three, ~0.25 s of the 1M-event trace's ~0.9 s of windows."""
    if end <= pos:
        return b"[]"
    with memoryview(raw) as whole, whole[pos:end] as part:
        return b"".join((b"[", part, b"]"))


@contextlib.contextmanager
def mapped_text(path: str) -> Iterator[Any]:
    """A read-only map of the trace's JSON text: the file itself, or for a ``.gz`` file a temporary
    file it is decompressed into block by block (removed on exit). TraceFormatError, with one line, for
    a missing file, a directory, or a truncated / corrupt gzip file; :class:`LayoutError` when no
    temporary file can be written (the caller loads the trace whole)."""
    if os.path.isdir(path):
        raise TraceFormatError(f"{path}: is a directory, expected a .json or .json.gz trace file")
    try:
        with open(path, "rb") as f:
            gz = f.read(2) == b"\x1f\x8b"
    except FileNotFoundError:
        raise TraceFormatError(f"{path}: no such file") from None
    tmp = None
    try:
        if gz:
            try:
                fd, tmp = tempfile.mkstemp(prefix="inductor_perf-", suffix=".json")
            except OSError as e:
                raise LayoutError(f"no temporary file ({e})") from None
            with os.fdopen(fd, "wb") as out, gzip.open(path, "rb") as src:
                while True:
                    try:
                        block = src.read(4 << 20)
                    except (EOFError, OSError, zlib.error) as e:
                        raise TraceFormatError(f"{path}: truncated or corrupt gzip file ({e})") from None
                    if not block:
                        break
                    try:
                        out.write(block)
                    except OSError as e:  # a full disk: the full load decompresses in memory instead
                        raise LayoutError(f"cannot write the decompressed text ({e})") from None
        with open(tmp or path, "rb") as f:
            if os.fstat(f.fileno()).st_size == 0:
                raise TraceFormatError(f"{path}: empty file, expected a JSON trace")
            m = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
        try:
            yield m
        finally:
            with contextlib.suppress(BufferError):
                m.close()
    finally:
        if tmp is not None:
            with contextlib.suppress(OSError):
                os.unlink(tmp)


def _release(raw: Any, lo: int, hi: int) -> None:
    """Give the pages of ``raw[lo:hi]`` back to the kernel (they are read again if touched)."""
    page = mmap.PAGESIZE
    a, b = (lo // page) * page, (hi // page) * page
    if b > a and hasattr(raw, "madvise"):
        with contextlib.suppress(OSError, ValueError):
            raw.madvise(mmap.MADV_DONTNEED, a, b - a)


class Windows:
    """The events of the ``traceEvents`` array of ``raw``, a window of about :data:`WINDOW_BYTES`
    at a time (:meth:`__iter__` yields each as a parsed list: dicts, or with ``typed`` envelopes;
    afterwards :attr:`header` is the trace's object with ``traceEvents`` empty), and :meth:`load` to
    parse one event again by its index.

    Each window's text is parsed as one array, so its events are exactly the array's elements; the
    byte span of each event is found (by the separator regex of :mod:`traces.files`) only for a
    window :meth:`load` reads from. Raises :class:`LayoutError` when the layout is not Kineto's.

    Two processes can share the windows (:mod:`inductor_perf.summary.stream.fork`): ``stop`` (from
    :meth:`cut_near`) ends this one's iteration at a window boundary, ``begin`` (that boundary minus
    one: where the next event begins) starts another one's there; the windows are then exactly those one
    iteration would give, and :meth:`adopt` appends the other's bookkeeping so that :meth:`load`
    reads its events too."""

    def __init__(self, raw: Any, path: str, window: int = WINDOW_BYTES, *, begin: int | None = None,
                 stop: int | None = None, typed: bool = False) -> None:
        self.raw, self.path, self.window = raw, path, window
        self.typed = typed
        """Windows yielded as envelopes (:func:`decode_envelopes`) where msgspec decodes them, else as
        orjson's dicts; may be changed between windows (the pass stops once a trace shows costs of
        its own)."""
        self.enveloped = False
        """Whether the window last yielded is envelopes."""
        self.start = tf.events_array_start(raw, unique=False)
        if self.start is None:
            raise LayoutError()
        self.begin = self.start if begin is None else begin
        self.stop = stop
        self.header: dict | None = None
        self.firsts: list[int] = []
        """Index of each window's first event."""
        self.sizes: list[int] = []
        """Each window's number of events."""
        self.bounds: list[tuple[int, int, int | None]] = []
        """Each window's text: ``raw[a:b]`` is its events with the separators between them; the end
        of the separator after it (None for the last window)."""
        self.count = 0
        """Events yielded so far (with :meth:`adopt`: the index after the last event adopted)."""
        self._spans: tuple[int, Any, Any] | None = None

    def _cut(self, pos: int) -> Any:
        """The separator that ends the window beginning at ``pos``; None: that window is the last."""
        raw = self.raw
        return tf._EVENT_SEP.search(raw, pos + self.window) if pos + self.window < len(raw) else None

    def cut_near(self, fraction: float) -> int | None:
        """The first window boundary (the end of the separator after a window) at least ``fraction``
        of the way from the array's start to the end of the text, found by the separator search
        alone (nothing parsed); None when the last window begins before it."""
        target = self.start + int((len(self.raw) - self.start) * fraction)
        pos = self.start
        while True:
            cut = self._cut(pos)
            if cut is None:
                return None
            if cut.end() >= target:
                return cut.end()
            pos = cut.end() - 1

    def __iter__(self) -> Iterator[list[Any]]:
        import orjson

        raw, count = self.raw, 0
        pos = self.begin
        while True:
            cut = self._cut(pos)
            if cut is None:
                last = tf.split_last_events(raw, pos)
                if last is None:
                    _raise_tail(raw, self.path, pos)
                    raise LayoutError()  # not strict JSON (NaN...): the full load reads it
                body_end = last[2]
            else:
                body_end = cut.start() + 1
            if tf.events_key_in(raw, pos, body_end):
                raise LayoutError()
            text = _array_text(raw, pos, body_end)
            parsed = decode_envelopes(text) if self.typed else None
            self.enveloped = parsed is not None
            if parsed is None:
                try:
                    parsed = orjson.loads(text)
                except orjson.JSONDecodeError:
                    raise LayoutError() from None
            del text
            self.firsts.append(count)
            self.sizes.append(len(parsed))
            self.bounds.append((pos, body_end, cut.end() if cut is not None else None))
            count += len(parsed)
            self.count = count
            yield parsed
            del parsed
            _release(raw, pos, body_end)
            if cut is None:
                self.header = self._header(body_end)
                return
            if cut.end() == self.stop:
                return
            pos = cut.end() - 1

    def part(self) -> tuple[list[int], list[int], list[tuple[int, int, int | None]], dict | None]:
        """What :meth:`adopt` takes from this iteration (plain containers: picklable)."""
        return self.firsts, self.sizes, self.bounds, self.header

    def adopt(self, part: tuple, base: int) -> None:
        """Append the :meth:`part` of the windows that follow this one's (another iteration, from
        this one's ``stop``), whose events are numbered here from ``base``."""
        firsts, sizes, bounds, header = part
        self.firsts.extend(f + base for f in firsts)
        self.sizes.extend(sizes)
        self.bounds.extend(bounds)
        self.count = base + sum(sizes)
        self.header = header

    def _header(self, end: int) -> dict:
        import orjson

        close = tf._CLOSE.match(self.raw, end)
        if close is None:
            raise LayoutError()
        try:
            header = orjson.loads(self.raw[:self.start] + self.raw[close.end() - 1:])
        except orjson.JSONDecodeError:
            raise LayoutError() from None
        if not isinstance(header, dict) or header.get("traceEvents") != []:
            raise LayoutError()
        return header

    def load(self, i: int) -> Any:
        """Event ``i`` parsed again from its bytes (the join reads a few back: flows, runtime args)."""
        import bisect

        import orjson

        w = bisect.bisect_right(self.firsts, i) - 1
        if self._spans is None or self._spans[0] != w:
            if self._spans is not None:  # the window read back before: its pages go back, as after the pass
                old = self.bounds[self._spans[0]]
                _release(self.raw, old[0], old[1])
            a, _, stop = self.bounds[w]
            if stop is None:
                last = tf.split_last_events(self.raw, a)
                if last is None:
                    raise LayoutError()
                starts, ends = last[0], last[1]
            else:
                starts, ends = tf.split_events(self.raw, a, stop)
            if len(starts) != self.sizes[w]:
                raise LayoutError()  # a separator inside a string: spans do not match events
            self._spans = (w, starts, ends)
        _, starts, ends = self._spans
        j = i - self.firsts[w]
        try:
            return orjson.loads(self.raw[starts[j]:ends[j]])
        except orjson.JSONDecodeError:  # in a window msgspec took (a number past a double's range...)
            raise LayoutError("not strict JSON") from None


def _raise_tail(raw: Any, path: str, pos: int) -> None:
    """TraceFormatError when the array's last piece is cut short (a file truncated mid-event); returns
    when it may only hold what the strict parser refuses (NaN / Infinity: the full load takes those)."""
    tail = raw[pos:]
    if re.search(rb"\bNaN\b|Infinity", tail):
        return
    if tf._CLOSE.search(tail) is None or tail.rstrip()[-1:] != b"}":
        raise TraceFormatError(f"{path}: truncated JSON (the trace ends inside its events, after byte {pos:,})")
