"""Kineto / Chrome trace JSON files: loading (plain or gzip, strict JSON), saving atomically, and
splitting a large file into byte spans of events. The vocabulary of events is in model/events.py."""

from __future__ import annotations

import contextlib
import errno
import functools
import gc
import gzip
import json
import logging
import os
import re
import stat
import tempfile
import zlib
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Iterable, Iterator

from ..errors import OutputError, TraceFormatError
from ..model.events import strict_json

if TYPE_CHECKING:  # pragma: no cover
    from array import array

# --- Loading and saving ---------------------------------------------------------------------------
# Nothing here imports torch: loading must stay cheap.

log = logging.getLogger(__name__)

_GZIP_MAGIC = b"\x1f\x8b"
# Events per serialization chunk when writing: bounds the extra memory of the encoded text.
_WRITE_CHUNK = 20_000
WRITE_BUFFER_BYTES = 1 << 20  # bytes buffered per write(2): small writes each cost a system call



@dataclass
class LoadedTrace:
    """A parsed trace and what loading had to repair."""

    trace: dict
    path: str
    non_finite: int = 0
    """NaN / Infinity literals in the file, each replaced by None (strict JSON has no such values)."""
    gzipped: bool = False


@contextlib.contextmanager
def gc_paused() -> Iterator[None]:
    """Disable the cyclic GC for the block and restore its previous state.

    Parsing builds millions of small dicts and lists; every 700 allocations the collector would
    walk all of them again, which makes loading a large trace several times slower.
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def orjson_or_none() -> Any:
    try:
        import orjson  # optional extra "fast"
    except ImportError:
        return None
    return orjson


def _read_bytes(path: str) -> tuple[bytes, bool]:
    try:
        with open(path, "rb") as f:
            raw = f.read()
    except IsADirectoryError:
        raise TraceFormatError(f"{path}: is a directory, expected a .json or .json.gz trace file") from None
    except FileNotFoundError:
        raise TraceFormatError(f"{path}: no such file") from None
    if raw[:2] == _GZIP_MAGIC:
        try:
            return gzip.decompress(raw), True
        except (EOFError, OSError, zlib.error) as e:
            raise TraceFormatError(f"{path}: truncated or corrupt gzip file ({e})") from None
    return raw, False


def _parse(raw: bytes, path: str) -> tuple[Any, int]:
    """JSON value of ``raw`` and the number of NaN/Infinity literals replaced by None."""
    orjson = orjson_or_none()
    if orjson is not None:
        try:
            return orjson.loads(raw), 0
        except orjson.JSONDecodeError:
            pass  # maybe NaN/Infinity: the stdlib parser accepts those
            # (orjson reads an integer outside [-2**63, 2**64) as a float, without an error)
    non_finite = 0

    def _constant(_name: str) -> None:
        nonlocal non_finite
        non_finite += 1
        return None

    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise TraceFormatError(f"{path}: not a JSON trace (not UTF-8 text: {e.reason} at byte {e.start})") from None
    try:
        return json.loads(text, parse_constant=_constant), non_finite
    except json.JSONDecodeError as e:
        what = "truncated JSON" if e.pos >= len(text.rstrip()) else "not valid JSON"
        raise TraceFormatError(f"{path}: {what} (line {e.lineno}, column {e.colno}: {e.msg})") from None
    except RecursionError:
        raise TraceFormatError(f"{path}: not a trace (JSON nested too deeply)") from None


def validate_trace(trace: Any, where: str = "trace") -> dict:
    """Return ``trace`` if it is a JSON object with a ``traceEvents`` list, else raise TraceFormatError."""
    if not isinstance(trace, dict):
        raise TraceFormatError(
            f"{where}: expected a JSON object with a 'traceEvents' list, got a JSON {_json_kind(trace)}")
    events = trace.get("traceEvents")
    if events is None:
        raise TraceFormatError(f"{where}: not a Chrome/Kineto trace: no 'traceEvents' key")
    if not isinstance(events, list):
        raise TraceFormatError(f"{where}: 'traceEvents' must be a list, got a JSON {_json_kind(events)}")
    return trace


def _json_kind(v: Any) -> str:
    if isinstance(v, dict):
        return "object"
    if isinstance(v, list):
        return "array"
    if isinstance(v, str):
        return "string"
    if isinstance(v, bool):
        return "boolean"
    if v is None:
        return "null"
    return "number"


def read_trace(path: str | os.PathLike) -> LoadedTrace:
    """Load a ``.json`` or ``.json.gz`` trace (gzip is detected from the content) and validate it.

    >>> read_trace("run.pt.trace.json.gz").trace["traceEvents"][0]["name"]  # doctest: +SKIP
    """
    p = os.fspath(path)
    raw, gz = _read_bytes(p)
    with gc_paused():
        value, non_finite = _parse(raw, p)
    del raw
    trace = validate_trace(value, p)
    if not trace["traceEvents"]:
        log.warning("%s: the trace has no events", p)
    if non_finite:
        log.warning("%s: %s NaN/Infinity values replaced by null", p, non_finite)
    return LoadedTrace(trace=trace, path=p, non_finite=non_finite, gzipped=gz)


def load_trace(path: str | os.PathLike) -> dict:
    """The trace dict of a ``.json`` / ``.json.gz`` file; TraceFormatError with one line otherwise."""
    return read_trace(path).trace


def json_encoder() -> Callable[[Any], bytes]:
    """A function that encodes a JSON value as strict JSON bytes (never NaN/Infinity)."""
    orjson = orjson_or_none()

    def std(v: Any) -> bytes:
        try:
            return json.dumps(v, allow_nan=False, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
        except ValueError:
            # A non-finite float somewhere in v: strict JSON has no spelling for it.
            return json.dumps(strict_json(v), allow_nan=False, separators=(",", ":"),
                              ensure_ascii=False).encode("utf-8")
        except (TypeError, RecursionError) as e:
            raise TraceFormatError(f"trace holds a value that is not JSON: {e}") from None

    if orjson is None:
        return std

    def fast(v: Any) -> bytes:
        try:
            # orjson writes NaN/Infinity as null, which is what we want.
            return orjson.dumps(v)
        except (TypeError, orjson.JSONEncodeError):
            # >64-bit integers, non-str keys, surrogates...: the stdlib encoder decides.
            return std(v)

    return fast


def save_trace(trace: dict, path: str | os.PathLike, *, inputs: Iterable[str | os.PathLike],
               progress: Callable[[float], None] | None = None) -> None:
    """Write ``trace`` as strict JSON (gzip when ``path`` ends with ``.gz``), atomically, never onto
    one of ``inputs`` (the files it was read from; ``()`` for none): :func:`write_atomic`.

    The file appears complete or not at all: we write a temporary file in the same directory and
    rename it. ``progress`` (optional) receives the fraction of events written.
    """
    validate_trace(trace, "trace to save")
    enc = json_encoder()
    write_atomic(path, lambda out: _write_streaming(out, trace, enc, progress), inputs=inputs)


GZIP_LEVEL = 6
# What gzip.GzipFile(mode="wb", compresslevel=GZIP_LEVEL, mtime=0) writes first, for writers that
# assemble a gzip member themselves (deflate_raw, gzip_trailer).
GZIP_HEADER = b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\xff"


def gzip_writer(raw: Any) -> gzip.GzipFile:
    """A gzip stream over the binary file ``raw`` (closing it leaves ``raw`` open)."""
    return gzip.GzipFile(fileobj=raw, mode="wb", compresslevel=GZIP_LEVEL, mtime=0)


def deflate_raw() -> Any:
    """A raw deflate compressor for the body of a gzip member: streams from two of them can be joined
    when the first ends with a ``Z_SYNC_FLUSH`` and the second with the final flush."""
    return zlib.compressobj(GZIP_LEVEL, zlib.DEFLATED, -zlib.MAX_WBITS)


def gzip_trailer(crc: int, size: int) -> bytes:
    """The end of a gzip member: CRC-32 and length (mod 2**32) of the uncompressed text."""
    return (crc & 0xFFFFFFFF).to_bytes(4, "little") + (size & 0xFFFFFFFF).to_bytes(4, "little")


def write_atomic(path: str | os.PathLike, write: Callable[..., None], *,
                 inputs: Iterable[str | os.PathLike], with_path: bool = False,
                 compress: bool | None = None) -> None:
    """Call ``write(f)`` with a binary file whose bytes become ``path`` only once ``write`` returns:
    a temporary file beside the target is fsynced and renamed onto it. What is written is
    gzip-compressed when ``compress`` is true, or when it is None and ``path`` ends with ``.gz``.

    ``inputs``: the files the output is made from (``()`` for none). The output may never be one of
    them (the same file, through a symlink or a hard link too), nor a directory, device or fifo
    (:func:`output_target`): OutputError, before anything is written. A symlink is written through:
    its target is replaced and the link stays. The file's mode is ``0o666`` less the umask, as
    ``open()`` gives a new file. Every error is an OutputError naming ``path``.

    ``with_path``: call ``write(f, temp_path)`` instead, for a writer that has another process
    write part of the temporary file (it must be done when ``write`` returns).

    >>> write_atomic("out.json", lambda f: f.write(b"{}"), inputs=["in.json"])  # doctest: +SKIP
    """
    p = os.fspath(path)
    target = output_target(p, inputs)
    if compress is None:
        compress = p.endswith(".gz")
    try:
        fd, tmp = tempfile.mkstemp(dir=os.path.dirname(target), prefix="." + os.path.basename(target) + ".",
                                   suffix=".tmp")
    except OSError as e:
        raise _output_error(p, e) from None
    try:
        os.fchmod(fd, 0o666 & ~umask())  # mkstemp makes 0o600 whatever the umask
        with os.fdopen(fd, "wb", buffering=WRITE_BUFFER_BYTES) as raw:
            out = gzip_writer(raw) if compress else raw
            try:
                if with_path:
                    write(out, tmp)
                else:
                    write(out)
            finally:
                if out is not raw:
                    out.close()
            raw.flush()
            os.fsync(raw.fileno())
        os.replace(tmp, target)
    except BaseException as e:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        if isinstance(e, OSError) and not isinstance(e, OutputError):
            raise _output_error(p, e, tmp) from None
        raise


def output_target(path: str | os.PathLike, inputs: Iterable[str | os.PathLike]) -> str:
    """The file that writing ``path`` replaces (``path`` with every symlink resolved), once it is
    known that writing may go ahead: OutputError (one line, naming ``path``) when it is one of
    ``inputs`` (the same file by device and inode: through symlinks, or another hard link) or when
    it exists and is not a regular file (a directory, a device such as ``/dev/null``, a fifo). A
    caller with long work before writing checks here first, so that the user hears it at once."""
    p = os.fspath(path)
    target = os.path.realpath(p)
    try:
        st = os.stat(target)
    except FileNotFoundError:
        return target  # a new file (a missing folder is reported when the file is created)
    except OSError as e:
        raise _output_error(p, e) from None
    if not stat.S_ISREG(st.st_mode):
        raise OutputError(f"{p}: is {_file_kind(st.st_mode)}; expected the path of a regular file to write")
    for q in inputs:
        try:
            sq = os.stat(q)
        except OSError:
            continue  # not there (any more): it cannot be the output
        if (sq.st_dev, sq.st_ino) == (st.st_dev, st.st_ino):
            q = os.fspath(q)
            same = "" if os.path.abspath(q) == os.path.abspath(p) else f" {q}"
            raise OutputError(f"{p}: this is the input file{same}; writing it would destroy the input: "
                              "expected another output path")
    return target


_FILE_KINDS = {stat.S_IFDIR: "a directory", stat.S_IFCHR: "a character device", stat.S_IFBLK: "a block device",
               stat.S_IFIFO: "a fifo (named pipe)", stat.S_IFSOCK: "a socket"}


def _file_kind(mode: int) -> str:
    return _FILE_KINDS.get(stat.S_IFMT(mode), "not a regular file")


def _output_error(path: str, e: OSError, tmp: str | None = None) -> OutputError:
    """An OutputError naming the user's ``path`` for ``e`` (whose message may name our temporary
    file ``tmp``: never shown)."""
    folder = os.path.dirname(path) or "."
    if e.errno == errno.ENOENT and (e.filename is None or e.filename == tmp or tmp is None):
        why = f"the folder {folder} does not exist; expected an existing folder"
    elif e.errno == errno.ENOTDIR:
        why = f"a part of {folder} is not a folder; expected an existing folder"
    elif e.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
        why = f"not allowed to write in the folder {folder} ({e.strerror})"
    elif e.filename is not None and e.filename not in (tmp, path):
        why = str(e)
    else:
        why = e.strerror or str(e)
    return OutputError(f"{path}: could not write it: {why}")


def umask() -> int:
    """The process's umask, which ``open()`` applies to the mode of the files it creates."""
    try:
        # Linux 4.7+ shows it; os.umask can only read it by setting it (see _umask_once)
        with open("/proc/self/status", "rb") as f:
            for line in f:
                if line.startswith(b"Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    return _umask_once()


@functools.lru_cache(maxsize=1)
def _umask_once() -> int:
    """The umask read by setting it and setting it back. That is process-wide: a file another thread
    creates in between gets the temporary value. So it is done once, and a later change of the
    umask is not seen (only where /proc/self/status does not show it)."""
    old = os.umask(0o022)
    os.umask(old)
    return old


def _write_streaming(out: Any, trace: dict, enc: Callable[[Any], bytes],
                     progress: Callable[[float], None] | None) -> None:
    # Keys keep their order; traceEvents is written in chunks so the encoded text of a
    # multi-GB trace never has to exist in memory at once.
    out.write(b"{")
    first = True
    for key, value in trace.items():
        if not isinstance(key, str):
            raise TraceFormatError(f"trace key {key!r} is not a string")
        if not first:
            out.write(b",")
        first = False
        out.write(enc(key) + b":")
        if key != "traceEvents":
            out.write(enc(value))
            continue
        out.write(b"[")
        n = len(value)
        for start in range(0, n, _WRITE_CHUNK):
            if start:
                out.write(b",")
            chunk = enc(value[start:start + _WRITE_CHUNK])
            out.write(chunk[1:-1])  # strip the chunk's own brackets
            if progress is not None:
                progress(min(1.0, (start + _WRITE_CHUNK) / n))
        out.write(b"]")
    out.write(b"}")


# --- Splitting a trace into event byte spans (the large-file path of augment) -------------------
_EVENTS_KEY = re.compile(rb'"traceEvents"\s*:\s*\[\s*')
# Kineto writes one event per object with only whitespace between "}," and the next "{"; a match
# inside a string or a nested object splits a value in two, and then a piece fails to parse.
_EVENT_SEP = re.compile(rb"\}\s*,\s*\{")
_CLOSE = re.compile(rb"\s*\]")


@dataclass
class SplitTrace:
    """A trace file's text and the byte span of each ``traceEvents`` element in it.

    Event ``i`` is ``raw[starts[i]:ends[i]]``; ``header`` is the trace's object with ``traceEvents``
    empty. The spans are not yet known to be valid JSON: whoever parses them must treat a failure as
    "layout not understood".
    """

    raw: bytes
    starts: "array[int]"
    ends: "array[int]"
    header: dict
    gzipped: bool

    def __len__(self) -> int:
        return len(self.starts)

    def event_bytes(self, i: int) -> bytes:
        """The text of event ``i``."""
        return self.raw[self.starts[i]:self.ends[i]]


def split_trace_file(path: str | os.PathLike) -> SplitTrace | None:
    """Find the byte span of every event of a trace file without parsing the events, or None when
    the file's layout is not the one expected (no orjson, ``"traceEvents"`` not exactly once, an
    unparseable frame around the array).

    Errors reading the file (missing, corrupt gzip) raise TraceFormatError as :func:`read_trace` does.
    The steps are public so that two processes can split the two halves of the array
    (:func:`events_array_start`, :func:`event_cut`, :func:`split_events`, :func:`split_last_events`,
    :func:`framed_split`); this is them in one process.
    """
    read = read_trace_bytes(path)
    if read is None:
        return None
    raw, gz = read
    start = events_array_start(raw)
    if start is None:
        return None
    last = split_last_events(raw, start)
    if last is None:
        return None
    starts, ends, end = last
    return framed_split(raw, gz, start, end, starts, ends)


def read_trace_bytes(path: str | os.PathLike, *, map_file: bool = False) -> tuple[Any, bool] | None:
    """The file's (decompressed) bytes and whether it was gzipped; None without orjson (the split
    path needs it).

    ``map_file``: an uncompressed, non-empty regular file comes back as a read-only ``mmap`` instead
    of a copy (slicing it gives bytes; it supports ``find``/``rfind``/``count`` and regex search like
    bytes). Pages are read as they are touched, by whichever process touches them, and a forked
    process shares them. The file must not be truncated while the map is in use.
    """
    if orjson_or_none() is None:
        return None
    p = os.fspath(path)
    if map_file:
        mapped = _map_plain_file(p)
        if mapped is not None:
            return mapped, False
    return _read_bytes(p)


def text_size(path: str | os.PathLike) -> int:
    """The size of a trace file's JSON text: its size on disk, or for a gzip file the uncompressed
    size its trailer records (modulo 4 GiB: when that is below the compressed size, 4 GiB is
    assumed)."""
    p = os.fspath(path)
    size = os.path.getsize(p)
    if size < 18:  # no gzip file is smaller (nor is a pipe's size known)
        return size
    with open(p, "rb") as f:
        if f.read(2) != _GZIP_MAGIC:
            return size
        f.seek(-4, os.SEEK_END)
        isize = int.from_bytes(f.read(4), "little")
    return isize if isize >= size else 1 << 32


def _map_plain_file(path: str) -> Any:
    """A read-only map of ``path`` when it is a non-empty regular file that is not gzipped, else None
    (the caller then reads it, which also reports what is wrong with it)."""
    import mmap

    try:
        with open(path, "rb") as f:
            st = os.fstat(f.fileno())
            if not stat.S_ISREG(st.st_mode) or st.st_size < 2 or f.read(2) == _GZIP_MAGIC:
                return None
            return mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    except (OSError, ValueError):
        return None


_EVENTS_NAME = b'"traceEvents"'


def events_array_start(raw: bytes, *, unique: bool = True) -> int | None:
    """Where the first element of the one ``"traceEvents"`` array begins, or None.

    ``unique=False`` leaves the check that the text ``"traceEvents"`` occurs only once to the caller
    (:func:`events_key_in`), who may share it between processes."""
    first = raw.find(_EVENTS_NAME)
    if first < 0 or (unique and events_key_in(raw, first + 1, len(raw))):
        return None
    m = _EVENTS_KEY.match(raw, first)
    return None if m is None else m.end()


def events_key_in(raw: bytes, lo: int, hi: int) -> bool:
    """Whether an occurrence of the text ``"traceEvents"`` starts in ``raw[lo:hi]``."""
    return raw.find(_EVENTS_NAME, lo, min(len(raw), hi + len(_EVENTS_NAME) - 1)) >= 0


def event_cut(raw: bytes, start: int, fraction: float) -> int | None:
    """A position splitting the array that begins at ``start`` about ``fraction`` of the way through
    the file's remaining bytes, between two events (the end of a separator match), or None.

    Every separator match found from there is one that :func:`split_events` from ``start`` would
    find as well (a match's inside holds no "}", so no match can start inside another): splitting
    ``[start, cut)`` and ``[cut - 1, ...)`` separately gives the same spans as splitting once.
    None for an empty array (whatever follows it is the header)."""
    if _CLOSE.match(raw, start) is not None:
        return None
    m = _EVENT_SEP.search(raw, start + int((len(raw) - start) * fraction))
    return None if m is None else m.end()


def split_events(raw: bytes, start: int, stop: int) -> tuple["array[int]", "array[int]"]:
    """The spans of the events from ``start`` up to the cut ``stop`` (from :func:`event_cut`): the
    event after them begins at ``stop - 1``."""
    from array import array

    starts, ends = array("q"), array("q")
    add_start, add_end = starts.append, ends.append
    for sep in _EVENT_SEP.finditer(raw, start, stop):
        add_start(start)
        add_end(sep.start() + 1)
        start = sep.end() - 1
    return starts, ends


def split_last_events(raw: bytes, start: int) -> tuple["array[int]", "array[int]", int] | None:
    """The spans of the events from ``start`` to the end of the array, and where the last one ends
    (``start`` for an empty array); None when the last element does not parse."""
    from array import array

    starts, ends = array("q"), array("q")
    if _CLOSE.match(raw, start) is not None:
        return starts, ends, start  # empty array
    add_start, add_end = starts.append, ends.append
    for sep in _EVENT_SEP.finditer(raw, start):
        add_start(start)
        add_end(sep.start() + 1)
        start = sep.end() - 1
    # The last element: find its end with a real parser (it is followed by "]" and the
    # rest of the header, where a "}," may legitimately appear).
    try:
        text = raw[start:].decode("utf-8")
        _, end_char = json.JSONDecoder().raw_decode(text)
    except (UnicodeDecodeError, ValueError, RecursionError):
        return None
    end = start + len(text[:end_char].encode("utf-8"))
    del text
    add_start(start)
    add_end(end)
    return starts, ends, end


def framed_split(raw: bytes, gz: bool, start: int, end: int, starts: "array[int]",
                 ends: "array[int]") -> SplitTrace | None:
    """The :class:`SplitTrace` of events ``starts``/``ends`` in the array from ``start`` (from
    :func:`events_array_start`) whose last element ends at ``end``, or None when what is around the
    array does not parse as the trace's object."""
    orjson = orjson_or_none()
    close = _CLOSE.match(raw, end)
    if close is None or orjson is None:
        return None
    try:
        header = orjson.loads(raw[:start] + raw[close.end() - 1:])
    except orjson.JSONDecodeError:
        return None
    if not isinstance(header, dict) or header.get("traceEvents") != []:
        return None
    return SplitTrace(raw=raw, starts=starts, ends=ends, header=header, gzipped=gz)
