"""Kernel tags persisted beside Inductor's FX graph cache entries.

An FX graph cache hit skips codegen, where tags are collected, and an AOTAutograd cache hit skips our
inner compile altogether (:mod:`.aot_cache`), so the backend stores each graph's tags in a file named
by its FX graph cache key and reads them back on either hit. The files live in their own folder of
Inductor's cache dir, namespaced by a hash of the code that computes tags (:func:`tag_sources`: all of
tagging/ and what it imports).
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import re
from typing import Any

from ..model.tags import GraphTags
from ..traces.files import write_atomic

# Bump when the tag format changes. Together with a hash of the code that computes tags it
# namespaces our FX graph cache entries and the tag files stored beside them, so a changed cost
# convention never reads tags computed by older code.
TAG_FORMAT_VERSION = "2"  # 2: symbol_locators stored (an AOTAutograd cache hit has no graph inputs to read them from)

# The subpackage whose code decides a stored tag: every module in it is hashed, a module no other one
# imports yet included (the compile, the collector: FX nodes -> KernelTag, node costs, kernel_io, module
# paths, the markers, this payload writer). Every module they import, at module level or inside a
# function, is followed (:func:`tag_sources`): the data model (model/tags.py), the op cost convention
# and formulas the node costs apply (costs/ops/), the writer, config, compat. So a module that starts
# deciding part of a tag is hashed without anyone remembering to add it (kernel_io.py, which sizes every
# kernel's bytes, was once left out of a hand-kept list). tagging/ imports no run-time stage: the
# capture and the device check reach a compile through the backend's StageHooks (tagging.compiler), so
# an edit of the capture, a summary or a report never makes every graph compile again.
TAG_PACKAGE = "tagging"

# Intra-package imports, read from the source text (nothing is imported): ``from .x import y``,
# ``from . import x, y`` (also parenthesized over lines), ``from inductor_perf.x import y``,
# ``import inductor_perf.x``, and any string literal naming a module (``import_module("inductor_perf.x")``).
# A match inside a docstring or comment only adds a file: the key can only cover more.
_RELATIVE = re.compile(r"^[ \t]*from[ \t]+(\.+)([\w.]*)[ \t]+import[ \t]+(\([^)]*\)|[^\n#;]+)", re.M)
_ABSOLUTE = re.compile(r"\b(?:from|import)[ \t]+inductor_perf((?:\.\w+)*)(?:[ \t]+import[ \t]+"
                       r"(\([^)]*\)|[^\n#;]+))?")
_STRING = re.compile(r"[\"']inductor_perf((?:\.\w+)+)[\"']")
_VERSION = re.compile(r"^__version__\s*=\s*[\"']([^\"']+)[\"']", re.M)


def _module_file(package_dir: str, parts: list[str]) -> str | None:
    """The file of module ``parts`` (relative to the package), or None when it is not ours or is
    the package itself (its ``__init__`` only re-exports, lazily: following it would reach every
    stage; :func:`code_hash` reads the version from it)."""
    if not parts:
        return None
    path = os.path.join(package_dir, *parts)
    if os.path.isfile(os.path.join(path, "__init__.py")):
        return os.path.join(path, "__init__.py")
    return path + ".py" if os.path.isfile(path + ".py") else None


def _names(clause: str | None) -> list[str]:
    """``(a, b as c)`` -> ``["a", "b"]``: the names an import clause takes."""
    if not clause:
        return []
    return [n.split()[0] for n in clause.strip("()").replace("\n", " ").split(",") if n.strip()]


def _imported(package_dir: str, parts: list[str], text: str) -> set[tuple[str, ...]]:
    """The package's modules that module ``parts`` imports anywhere in ``text``."""
    is_pkg = os.path.basename(_module_file(package_dir, parts) or "") == "__init__.py"
    here = parts if is_pkg else parts[:-1]
    found: list[list[str]] = []
    for dots, mod, clause in _RELATIVE.findall(text):
        base = here[:len(here) - (len(dots) - 1)] + [p for p in mod.split(".") if p]
        found.append(base)
        found.extend(base + [n] for n in _names(clause))  # "from . import x" names a module
    for mod, clause in _ABSOLUTE.findall(text):
        base = [p for p in mod.split(".") if p]
        found.append(base)
        found.extend(base + [n] for n in _names(clause))
    found.extend([p for p in mod.split(".") if p] for mod in _STRING.findall(text))
    return {tuple(f) for f in found if _module_file(package_dir, f) is not None}


def _package_modules(package_dir: str, sub: str) -> list[tuple[str, ...]]:
    """Every module of subpackage ``sub`` (its ``__init__`` as the subpackage itself), as parts."""
    root = os.path.join(package_dir, sub)
    if not os.path.isfile(os.path.join(root, "__init__.py")):
        raise FileNotFoundError(f"{package_dir}: no subpackage {sub} to hash for the tag cache key")
    out = []
    for folder, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if os.path.isfile(os.path.join(folder, d, "__init__.py")))
        for name in sorted(files):
            if name.endswith(".py"):
                parts = os.path.relpath(os.path.join(folder, name[:-3]), package_dir).split(os.sep)
                out.append(tuple(parts[:-1] if parts[-1] == "__init__" else parts))
    return out


def tag_sources(package_dir: str) -> list[str]:
    """The files (relative to ``package_dir``, sorted) whose code decides a stored tag: every module
    of :data:`TAG_PACKAGE` and everything they import, transitively.

    >>> "tagging/kernel_io.py" in tag_sources(os.path.dirname(os.path.dirname(__file__)))
    True
    """
    seen: set[tuple[str, ...]] = set()
    todo = _package_modules(package_dir, TAG_PACKAGE)
    while todo:
        parts = todo.pop()
        if parts in seen:
            continue
        seen.add(parts)
        path = _module_file(package_dir, list(parts))
        if path is None:
            raise FileNotFoundError(f"{package_dir}: no module {'.'.join(parts)} to hash for the tag cache key")
        with open(path, encoding="utf-8") as f:
            todo.extend(_imported(package_dir, list(parts), f.read()) - seen)
    files = {_module_file(package_dir, list(p)) for p in seen}
    return sorted(os.path.relpath(f, package_dir) for f in files if f is not None)


def code_hash(package_dir: str) -> str:
    """A digest of the tag format version, the package version and the :func:`tag_sources` of the
    package at ``package_dir`` (each file's name and bytes)."""
    h = hashlib.sha256(TAG_FORMAT_VERSION.encode())
    with open(os.path.join(package_dir, "__init__.py"), encoding="utf-8") as f:
        version = _VERSION.search(f.read())
    h.update(b"\0" + (version.group(1) if version else "").encode())
    for rel in tag_sources(package_dir):
        with open(os.path.join(package_dir, rel), "rb") as f:
            data = f.read()
        h.update(b"\0%s\0%d\0" % (rel.replace(os.sep, "/").encode(), len(data)))
        h.update(data)
    return h.hexdigest()[:16]


@functools.lru_cache(maxsize=1)
def tag_code_hash() -> str:
    """:func:`code_hash` of this package, computed once per process (3-11 ms measured on a busy
    2-core machine: the first compile pays it)."""
    return code_hash(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def tags_dir() -> str:
    from torch._inductor.runtime.cache_dir_utils import cache_dir

    return os.path.join(cache_dir(), "inductor_perf", f"tags-{tag_code_hash()}")


def _path(cache_key: str) -> str:
    safe = hashlib.sha256(cache_key.encode()).hexdigest()[:40]
    return os.path.join(tags_dir(), f"{safe}.json")


def store(graph: GraphTags) -> None:
    """Write ``graph``'s kernel tags beside its FX graph cache entry (atomically)."""
    assert graph.cache_key is not None
    path = _path(graph.cache_key)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    payload = {"cache_key": graph.cache_key, "profiler_graph_id": graph.profiler_graph_id,
               "symbol_locators": {k: list(v) for k, v in graph.symbol_locators.items()},
               "kernels": [k.to_dict() for k in graph.kernels]}
    # atomic: a concurrent reader sees the old file or the new one
    write_atomic(path, lambda f: f.write(json.dumps(payload, allow_nan=False).encode()), inputs=())


def load(cache_key: str | None) -> dict[str, Any] | None:
    """The stored tags of a cache entry, or None when missing, unreadable or for another key.

    Written by :func:`store`: ``cache_key``, ``profiler_graph_id``, ``symbol_locators`` (JSON lists)
    and ``kernels`` (``KernelTag.to_dict()`` each)."""
    if not cache_key:
        return None
    try:
        with open(_path(cache_key)) as f:
            payload = json.load(f)
    except (OSError, ValueError):
        return None
    if payload.get("cache_key") != cache_key:
        return None
    return payload
