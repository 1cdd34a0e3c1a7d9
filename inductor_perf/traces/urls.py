"""Traces named by an fsspec URL (``s3://bucket/run/rank0.json.gz``, ``gs://…``, ``file://…``): list a
folder of them, and copy one to a local file for the readers of :mod:`inductor_perf.traces.files`
(which map and stream local files).

fsspec (and s3fs for ``s3://``, gcsfs for ``gs://``) is optional: ``pip install 'inductor-perf[dask]'``.
Credentials and endpoints are fsspec's own configuration (its config file, or variables such as
``FSSPEC_S3_ENDPOINT_URL`` and the AWS ones), read by fsspec on the machine that opens the file.

A copy is streamed in :data:`COPY_CHUNK` pieces, so reading a rank from object storage holds one
chunk in memory, and the copy is removed when its reader is done.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import tempfile
from typing import Any, Iterator

from ..errors import InductorPerfError

COPY_CHUNK = 8 << 20
"""Bytes read from the URL at a time while copying it to a local file."""
INSTALL_HINT = "pip install 'inductor-perf[dask]'"
_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]+)://")


def _why(e: BaseException) -> str:
    """An exception as one line: its type and its message's first line."""
    lines = str(e).strip().splitlines()
    return f"{type(e).__name__}: {lines[0]}" if lines else type(e).__name__


def is_url(path: str) -> bool:
    """True when ``path`` names a file through a protocol (``s3://…``, ``file://…``), not a local path."""
    return bool(_SCHEME.match(str(path)))


def filesystem(url: str) -> tuple[Any, str]:
    """(fsspec filesystem, path within it) of ``url``; InductorPerfError naming ``url`` and the install
    command when fsspec or the protocol's package is missing."""
    try:
        import fsspec
    except ImportError:
        raise InductorPerfError(f"{url}: reading a URL needs fsspec: {INSTALL_HINT}") from None
    try:
        fs, path = fsspec.core.url_to_fs(url)
    except ImportError as e:  # the protocol's own package (s3fs, gcsfs)
        raise InductorPerfError(f"{url}: {_why(e)} ({INSTALL_HINT} installs fsspec and s3fs)") from None
    except ValueError as e:
        raise InductorPerfError(f"{url}: {_why(e)}") from None
    return fs, path


def _unstrip(fs: Any, url: str, path: str) -> str:
    """The URL of ``path`` (as ``fs.ls`` gives it) in the protocol ``url`` was written with."""
    scheme = _SCHEME.match(url).group(1)  # type: ignore[union-attr]
    return f"{scheme}://{path.lstrip('/') if scheme != 'file' else path}"


def list_traces(url: str, suffixes: tuple[str, ...], exclude: tuple[str, ...]) -> list[str] | None:
    """The URLs of the files of folder ``url`` whose names end with one of ``suffixes`` and none of
    ``exclude``, sorted; None when ``url`` is not a folder; InductorPerfError when it does not exist
    or cannot be listed."""
    fs, path = filesystem(url)
    try:
        if not fs.isdir(path):
            if fs.exists(path):
                return None
            raise InductorPerfError(f"{url}: no such file or folder; expected a trace file or a folder of traces")
        names = fs.ls(path, detail=False)
    except InductorPerfError:
        raise
    except Exception as e:  # the storage's own errors (permissions, endpoint): one line naming the URL
        raise InductorPerfError(f"{url}: cannot list it ({_why(e)})") from None
    return sorted(_unstrip(fs, url, n) for n in names if n.endswith(suffixes) and not n.endswith(exclude))


@contextlib.contextmanager
def local_copy(url: str) -> Iterator[str]:
    """A local copy of the file ``url`` (same base name, in a fresh temporary folder), removed on exit.
    OSError naming ``url`` when it cannot be read."""
    fs, path = filesystem(url)
    folder = tempfile.mkdtemp(prefix="inductor_perf_url_")
    try:
        local = os.path.join(folder, os.path.basename(path.rstrip("/")) or "trace.json")
        try:
            with fs.open(path, "rb") as src, open(local, "wb") as dst:
                shutil.copyfileobj(src, dst, COPY_CHUNK)
        except Exception as e:  # FileNotFoundError, the storage's errors: one line naming the URL
            raise OSError(f"{url}: cannot read it ({_why(e)})") from None
        yield local
    finally:
        shutil.rmtree(folder, ignore_errors=True)
