"""Running one measured command for `make bench`: wall time and peak memory of its whole process tree,
and a description of the machine it ran on.

Peak memory is the larger of two readings: the sum of the resident set sizes of the command and all
its descendants, sampled every 0.1 s from /proc (a forked worker or a multiprocessing pool counts: both
our augment and HTA's loader fork), and the largest single process's peak from ``os.wait4``'s
rusage (exact, but per process: Linux folds a waited-for child's peak into its parent's as a maximum,
not a sum). Sampling can miss a peak shorter than 0.1 s; the summed reading over-counts pages that
forked processes share copy-on-write. Scanning /proc costs ~2 ms per sample here.
"""

from __future__ import annotations

import os
import platform
import subprocess
import threading
import time

PAGE = os.sysconf("SC_PAGE_SIZE")


def _ppid_rss() -> dict[int, tuple[int, int]]:
    """pid -> (parent pid, resident bytes) of every process visible in /proc."""
    out = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as f:
                stat = f.read()
        except OSError:
            continue
        fields = stat[stat.rindex(b")") + 2:].split()  # after "(comm)": state ppid ... rss is field 24
        out[int(name)] = (int(fields[1]), int(fields[21]) * PAGE)
    return out


def tree_rss(root: int) -> int:
    """Resident bytes of ``root`` and all its descendants now."""
    procs = _ppid_rss()
    children: dict[int, list[int]] = {}
    for pid, (ppid, _) in procs.items():
        children.setdefault(ppid, []).append(pid)
    total, todo = 0, [root]
    while todo:
        pid = todo.pop()
        total += procs.get(pid, (0, 0))[1]
        todo += children.get(pid, [])
    return total


def measure(cmd: list[str], env: dict | None = None, timeout: float = 1800) -> dict:
    """Run ``cmd``; return rc, wall_s, peak_mb (the larger reading, MB = 10^6 bytes), tree_mb,
    proc_mb, cpu_s (user + system CPU seconds of the command and of the children it waited for: a
    child it leaves to exit on its own is not counted) and the tail of its stderr."""
    t0 = time.perf_counter()
    p = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    peak = [0]
    done = threading.Event()

    def sample() -> None:
        while not done.wait(0.1):
            try:
                peak[0] = max(peak[0], tree_rss(p.pid))
            except (OSError, ValueError, IndexError):
                pass

    th = threading.Thread(target=sample, daemon=True)
    th.start()
    err = b""
    try:
        err = p.stderr.read()  # until the command closes stderr (it exits); the sampler runs meanwhile
        _, status, usage = os.wait4(p.pid, 0)
    finally:
        done.set()
        th.join()
        if p.poll() is None and p.returncode is None:
            p.kill()
    wall = time.perf_counter() - t0
    p.returncode = os.waitstatus_to_exitcode(status)
    proc_b = usage.ru_maxrss * 1024
    return {"rc": p.returncode, "wall_s": wall, "tree_mb": peak[0] / 1e6, "proc_mb": proc_b / 1e6,
            "peak_mb": max(peak[0], proc_b) / 1e6, "cpu_s": usage.ru_utime + usage.ru_stime,
            "stderr_tail": err.decode(errors="replace")[-600:]}


def machine() -> dict:
    """CPU model, cores, RAM, load average, OS: what a figure was measured on."""
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    ram_gb = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 1e9
    return {"cpu": cpu, "cores": os.cpu_count(), "ram_gb": round(ram_gb, 1),
            "load": [round(x, 2) for x in os.getloadavg()], "os": f"{platform.system()} {platform.release()}",
            "python": platform.python_version()}


def torch_version(python: str) -> str:
    """torch's version as ``python`` sees it (without importing torch here)."""
    try:
        out = subprocess.run([python, "-c", "import importlib.metadata as m; print(m.version('torch'))"],
                             capture_output=True, text=True, timeout=60)
        return out.stdout.strip() or "not installed"
    except (OSError, subprocess.SubprocessError):
        return "unknown"
