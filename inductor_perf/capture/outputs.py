"""Where a capture's files go: ``<dir>/<name>`` that no other run (another rank, another process, an
earlier run) uses, reserved before the files are written (:func:`reserve_base`, :func:`release`)."""

from __future__ import annotations

import datetime
import os
import socket


def _rank() -> tuple[int | None, int | None]:
    try:
        import torch.distributed as dist

        if dist.is_available() and dist.is_initialized():
            return dist.get_rank(), dist.get_world_size()
    except Exception:
        pass
    rank = os.environ.get("RANK")
    world = os.environ.get("WORLD_SIZE")
    return (int(rank) if rank and rank.isdigit() else None,
            int(world) if world and world.isdigit() else None)


OUTPUT_SUFFIXES = (".trace.json.gz", ".summary.txt", ".summary.json", ".report.html")


def reserve_base(out_dir: str, name: str | None) -> str:
    """``<dir>/<name>`` that no other run uses, reserved with an exclusive lock file.

    Names carry the rank when there is one (also a name the user chose), and by default host, pid
    and time. The reservation (``.<name>.lock``, created with O_EXCL) closes the window between
    choosing a name and writing the files, in which another process could pick the same name;
    :func:`release` removes it once the files are written.
    """
    rank, _ = _rank()
    if name is None:
        stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
        host = socket.gethostname().split(".")[0] or "host"
        name = f"{host}_pid{os.getpid()}" + (f"_rank{rank}" if rank is not None else "") + f"_{stamp}"
    elif rank is not None:
        name = f"{name}_rank{rank}"
    base = os.path.join(out_dir, name)
    n = 1
    candidate = base
    while True:
        if not any(os.path.exists(candidate + ext) for ext in OUTPUT_SUFFIXES):
            try:
                fd = os.open(_lock_path(candidate), os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
                os.close(fd)
                return candidate
            except FileExistsError:
                pass
        n += 1
        candidate = f"{base}_{n}"


def _lock_path(base: str) -> str:
    head, tail = os.path.split(base)
    return os.path.join(head, f".{tail}.lock")


def release(base: str) -> None:
    try:
        os.unlink(_lock_path(base))
    except OSError:
        pass
