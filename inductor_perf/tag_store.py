"""Kernel tags persisted beside Inductor's FX graph cache entries.

An FX graph cache hit skips codegen, where tags are collected, so the backend stores each graph's tags
in a file named by its cache key and reads them back on a hit. The files live in their own folder of
Inductor's cache dir, namespaced by a hash of the code that computes tags.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
from typing import Any

from .tags import GraphTags
from .trace_format import write_atomic

# Bump when the tag format changes. Together with a hash of the modules that compute tags it
# namespaces our FX graph cache entries and the tag files stored beside them, so a changed cost
# convention never reads tags computed by older code.
TAG_FORMAT_VERSION = "1"
_TAG_SOURCES = ("tags.py", "tagging.py", "costs.py", "backend.py", "tag_store.py",
                "module_paths.py")


@functools.lru_cache(maxsize=1)
def tag_code_hash() -> str:
    h = hashlib.sha256(TAG_FORMAT_VERSION.encode())
    here = os.path.dirname(os.path.abspath(__file__))
    for name in _TAG_SOURCES:
        with open(os.path.join(here, name), "rb") as f:
            h.update(f.read())
    return h.hexdigest()[:16]


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
               "kernels": [k.to_dict() for k in graph.kernels]}
    # atomic: a concurrent reader sees the old file or the new one
    write_atomic(path, lambda f: f.write(json.dumps(payload, allow_nan=False).encode()), inputs=())


def load(cache_key: str | None) -> dict[str, Any] | None:
    """The stored tags of a cache entry, or None when missing, unreadable or for another key."""
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
