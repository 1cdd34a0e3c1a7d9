"""Which engine reads a trace file, and the size that makes a trace large: one definition of each,
read by every command that takes ``engine=`` (augment, summary, diff) and by every pass that forks.

A trace is large from :data:`LARGE_TRACE_BYTES` of JSON text (:func:`~inductor_perf.traces.files.text_size`:
a ``.gz`` file counts uncompressed). ``engine="auto"`` streams a large file (:func:`streams`) instead
of loading it whole, and the streaming passes share a large file with a forked process
(``augment.stream.engine``, ``summary.stream.fork``: each imports :data:`LARGE_TRACE_BYTES`).
"""

from __future__ import annotations

import os

from .files import text_size

ENGINES = ("auto", "full", "stream")
"""The engines a command takes by name: ``"full"`` loads the whole trace as dicts; ``"stream"`` reads
it in windows of the file's bytes (bounded memory; a file whose layout that engine does not take is
loaded whole instead); ``"auto"`` streams a large file (:func:`streams`) and loads any other whole."""

LARGE_TRACE_BYTES = 50_000_000
"""Traces whose JSON text is at least this large are large: ``engine="auto"`` streams them, and the
streaming passes fork a second process for them where ``os.fork`` exists (below it, starting the
process costs more than it saves). A test may lower it for one use by replacing the name in the
module that imported it."""


def check_engine(engine: str, command: str) -> str:
    """``engine`` when it is one of :data:`ENGINES`; else ValueError naming ``command`` and the
    valid names.

    >>> check_engine("stream", "summary")
    'stream'
    """
    if engine not in ENGINES:
        raise ValueError(f"unknown {command} engine {engine!r}; expected one of {', '.join(map(repr, ENGINES))}")
    return engine


def is_large(path: str | os.PathLike) -> bool:
    """Whether the trace file ``path`` has :data:`LARGE_TRACE_BYTES` of JSON text or more; False when
    its size cannot be read (the whole load then says what is wrong with the path)."""
    try:
        return text_size(path) >= LARGE_TRACE_BYTES
    except OSError:
        return False


def streams(path: str | os.PathLike, engine: str) -> bool:
    """Whether ``engine`` (one of :data:`ENGINES`) reads ``path`` by the streaming engine: ``"stream"``
    always, ``"auto"`` for a large file (:func:`is_large`)."""
    return engine == "stream" or engine == "auto" and is_large(path)
