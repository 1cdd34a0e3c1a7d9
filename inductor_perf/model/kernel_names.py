"""Readable kernel names for tables: the function and what tells it apart (tile, functor, dtype),
without ``void``, argument lists or namespaces. JSON keeps the full names; only text and markdown
show these.

A demangled CUDA kernel name is mostly noise for a reader::

    void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>,
        at::detail::Array<char*, 3> >(int, at::native::CUDAFunctor_add<float>, at::detail::Array<char*, 3>)

reads ``vectorized_elementwise_kernel<CUDAFunctor_add<float>>``, and
``void cutlass::Kernel<cutlass_80_tensorop_s1688gemm_64x64_32x4_nn_align1>(…::Params)`` reads
``cutlass_80_tensorop_s1688gemm_64x64_32x4_nn_align1``. Names of a table that would read the same
are lengthened until they differ (:func:`readable_names`), so a table never shows two rows with one
name. Pure and torch-free.
"""

from __future__ import annotations

import re
from typing import Iterable

ELLIPSIS = "…"

_LAMBDA = re.compile(r"::\{lambda\((?:[^()]|\([^()]*\))*\)#\d+\}")
# ``neg_kernel_cuda(TensorIteratorBase&)::{lambda()#2}::operator()() const::{lambda(float)#1}``: the
# dispatching function and the dtype of the innermost lambda, ``neg_kernel_cuda<float>``.
_LAMBDA_CHAIN = re.compile(r"(\w+)\([^()]*\)((?:::\{lambda\([^()]*\)#\d+\}|::operator\(\)\(\)(?: const)?)+)")
_LAMBDA_PARAMS = re.compile(r"\{lambda\(([^()]*)\)#\d+\}")
_NAMESPACE = re.compile(r"(?<![\w>])(?:[A-Za-z_]\w*::)+(?=[A-Za-z_~])")
_NUMBER = re.compile(r"^-?\d+[uUlL]*$")
_BUILTIN = frozenset({
    "float", "double", "int", "long", "short", "char", "bool", "unsigned", "signed", "half", "Half",
    "BFloat16", "int8_t", "uint8_t", "int16_t", "int32_t", "int64_t", "uint32_t", "uint64_t", "true",
    "false", "char*", "void", "void*", "size_t", "nullptr_t", "decltype(nullptr)", "Float8_e4m3fn",
    "Float8_e5m2", "complex<float>", "complex<double>",
})
# Template arguments that say how, not what: vector widths' containers, offset calculators, casts.
_NOISE_HEADS = frozenset({"Array", "TrivialOffsetCalculator", "OffsetCalculator", "LoadWithoutCast",
                          "StoreWithoutCast", "LoadWithCast", "StoreWithCast", "MemBoundScaling"})
# Templates that only wrap the interesting argument: show the argument.
_WRAPPERS = frozenset({"gpu_kernel_impl", "gpu_kernel_impl_nocast", "func_wrapper_t", "BinaryFunctor",
                       "AUnaryFunctor", "BUnaryFunctor", "UnaryFunctor", "ReduceOp", "Kernel", "Kernel2",
                       "device_kernel"})


def _match(s: str, i: int, open_c: str, close_c: str) -> int:
    """Index of the bracket closing the one at ``s[i]``, or -1."""
    depth = 0
    for j in range(i, len(s)):
        c = s[j]
        if c == open_c:
            depth += 1
        elif c == close_c:
            depth -= 1
            if depth == 0:
                return j
    return -1


def _drop_parens(s: str) -> str:
    """``s`` without any parenthesized group (argument lists of nested functions, casts)."""
    out: list[str] = []
    depth = 0
    for c in s:
        if c == "(":
            depth += 1
        elif c == ")":
            depth = max(0, depth - 1)
        elif depth == 0:
            out.append(c)
    return "".join(out)


def strip_args(name: str) -> str:
    """``name`` without a leading ``void `` and its trailing argument list (a ``(...)`` glued to the
    name; ``Memcpy HtoD (Pinned -> Device)`` keeps its words).

    >>> strip_args("void k<float>(float const*, int)"), strip_args("Memcpy DtoD (Device -> Device)")
    ('k<float>', 'Memcpy DtoD (Device -> Device)')
    """
    s = name.strip()
    if s.startswith("void "):
        s = s[5:].lstrip()
    if not s.endswith(")"):
        return s
    depth = 0
    for i in range(len(s) - 1, -1, -1):
        c = s[i]
        if c == ")":
            depth += 1
        elif c == "(":
            depth -= 1
            if depth == 0:
                if i > 0 and (s[i - 1].isalnum() or s[i - 1] in "_>"):
                    return s[:i]
                return s
    return s


def compact_name(name: str) -> str:
    """The function with its full template arguments: no ``void``, argument lists, namespaces,
    lambdas or ``operator()``.

    >>> compact_name("void at::native::(anonymous namespace)::CatArrayBatchedCopy<float, unsigned int, "
    ...              "2, 64, 64>(float*, int)")
    'CatArrayBatchedCopy<float, unsigned int, 2, 64, 64>'
    """
    s = strip_args(name)
    if "<" not in s and "::" not in s:
        return s
    s = s.replace("(anonymous namespace)::", "")
    s = _LAMBDA_CHAIN.sub(_lambda_hint, s)
    s = _LAMBDA.sub("", s)
    s = s.replace("::operator()", "").replace(" const", "")
    if "(" in s and "<" in s:
        s = _drop_parens(s)
    s = _NAMESPACE.sub("", s)
    s = s.replace("> >", ">>").replace("> >", ">>").strip()
    return _drop_return_type(s)


def _lambda_hint(m: re.Match) -> str:
    params = [p for p in _LAMBDA_PARAMS.findall(m.group(2)) if p.strip()]
    return f"{m.group(1)}<{params[-1]}>" if params else m.group(1)


def _drop_return_type(s: str) -> str:
    """``enable_if<…, void>::type kernel<…>`` -> ``kernel<…>``: text after the last space outside
    brackets."""
    depth, cut = 0, -1
    for i, c in enumerate(s):
        if c in "<(":
            depth += 1
        elif c in ">)":
            depth -= 1
        elif c == " " and depth == 0:
            cut = i
    return s[cut + 1:] if cut >= 0 else s


def _split_args(s: str) -> tuple[str, list[str], str] | None:
    """(head, top-level template arguments, tail) of ``head<args>tail``; None without a template."""
    i = s.find("<")
    if i <= 0:
        return None
    j = _match(s, i, "<", ">")
    if j < 0:
        return None
    args, depth, start = [], 0, i + 1
    for k in range(i + 1, j):
        c = s[k]
        if c in "<(":
            depth += 1
        elif c in ">)":
            depth -= 1
        elif c == "," and depth == 0:
            args.append(s[start:k].strip())
            start = k + 1
    args.append(s[start:j].strip())
    return s[:i].strip(), [a for a in args if a], s[j + 1:]


def _plain(arg: str) -> bool:
    """A number or a builtin type: says little about what a kernel does."""
    return bool(_NUMBER.match(arg)) or arg in _BUILTIN or arg.replace("unsigned ", "") in _BUILTIN


def _leaf(arg: str) -> str | None:
    """The most telling part of one template argument: wrappers give way to what they wrap; noise
    (containers, offset calculators, casts) is None."""
    parts = _split_args(arg)
    head = parts[0] if parts else arg
    if head in _NOISE_HEADS:
        return None
    if parts and head in _WRAPPERS:
        inner = [a for a in parts[1] if not _plain(a)]
        return _leaf(inner[-1]) if inner else arg
    return arg


def short_name(name: str) -> str:
    """:func:`compact_name` with the template arguments cut to what tells kernels apart: the wrapped
    functor or tile, the first dtype; numbers and plumbing dropped.

    >>> short_name("void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>, "
    ...            "at::detail::Array<char*, 3> >(int, at::native::CUDAFunctor_add<float>, "
    ...            "at::detail::Array<char*, 3>)")
    'vectorized_elementwise_kernel<CUDAFunctor_add<float>>'
    >>> short_name("void cutlass::Kernel<cutlass_80_tensorop_s1688gemm_64x64_32x4_nn_align1>("
    ...            "cutlass_80_tensorop_s1688gemm_64x64_32x4_nn_align1::Params)")
    'cutlass_80_tensorop_s1688gemm_64x64_32x4_nn_align1'
    """
    c = compact_name(name)
    parts = _split_args(c)
    if parts is None:
        return c
    head, args, tail = parts
    if head in _WRAPPERS and len(args) == 1:
        return (_leaf(args[0]) or c) + tail
    kept: list[str] = []
    dtype_seen = False
    for a in args:
        if _NUMBER.match(a):
            continue
        if _plain(a):
            if not dtype_seen and a not in ("true", "false"):
                kept.append(a)
                dtype_seen = True
            continue
        leaf = _leaf(a)
        if leaf is not None and leaf not in kept:
            kept.append(leaf)
    return head + (f"<{', '.join(kept)}>" if kept else "") + tail


def _levels(name: str) -> list[str]:
    """Ever longer spellings of ``name``: short, compact, compact with its arguments, the full name."""
    with_args = _NAMESPACE.sub("", name.replace("(anonymous namespace)::", ""))
    with_args = with_args[5:] if with_args.startswith("void ") else with_args
    out: list[str] = []
    for s in (short_name(name), compact_name(name), with_args, name):
        if not out or s != out[-1]:
            out.append(s)
    return out


def fit(text: str, width: int | None, tail: int | None = None) -> str:
    """``text`` cut to ``width`` characters with one ellipsis, keeping ``tail`` characters of the end
    (default: a little under half: the end holds tiles, layouts and indices).

    >>> fit("cutlass_80_tensorop_s1688gemm_64x64_32x4_nn_align1", 30)
    'cutlass_80_tens…32x4_nn_align1'
    """
    if width is None or len(text) <= width:
        return text
    if width <= 1:
        return text[:width]
    keep = width - 1
    t = (keep // 2) if tail is None else max(0, min(keep, tail))
    return text[:keep - t] + ELLIPSIS + (text[len(text) - t:] if t else "")


def _fit_apart(texts: dict[str, str], width: int) -> dict[str, str] | None:
    """One ellipsis position at which all ``texts`` (key -> text) still read differently, or None."""
    keep = width - 1
    for t in sorted(range(1, keep), key=lambda x: abs(x - keep // 2)):
        shown = {k: fit(v, width, t) for k, v in texts.items()}
        if len(set(shown.values())) == len(shown):
            return shown
    return None


def readable_names(names: Iterable[str], width: int | None = None) -> dict[str, str]:
    """A display name for each of ``names`` (full name -> display), each at most ``width``
    characters where that keeps them apart, and no two alike.

    Each starts as :func:`short_name` cut to ``width``; names that collide are first cut at
    another place, then spelled longer (the compact name, then with arguments, then the full name)
    until they differ.

    >>> d = readable_names(["void k<float, 4>(int)", "void k<float, 2>(int)"])
    >>> sorted(d.values())
    ['k<float, 2>', 'k<float, 4>']
    """
    full = list(dict.fromkeys(names))
    levels = {n: _levels(n) for n in full}
    level = dict.fromkeys(full, 0)
    shown = {n: fit(levels[n][0], width) for n in full}
    for _ in range(4 * len(full) + 4):
        groups: dict[str, list[str]] = {}
        for n in full:
            groups.setdefault(shown[n], []).append(n)
        clashes = [g for g in groups.values() if len(g) > 1]
        if not clashes:
            return shown
        for group in clashes:
            others = {shown[n] for n in full if n not in group}
            shown.update(_apart(group, levels, level, width, others))
    # Unreachable for distinct full names; numbered rather than shown alike, whatever happens.
    seen: dict[str, int] = {}
    for n in full:
        seen[shown[n]] = seen.get(shown[n], 0) + 1
        if seen[shown[n]] > 1:
            shown[n] = f"{shown[n]} [{seen[shown[n]]}]"
    return shown


def _apart(group: list[str], levels: dict[str, list[str]], level: dict[str, int],
           width: int | None, others: set[str]) -> dict[str, str]:
    """Displays of names that read alike, spelled longer (``level`` raised in place) until they
    differ, then cut to ``width`` at a place that keeps them apart from each other and from
    ``others`` (the displays of the rest) when there is one."""
    while True:
        texts = {n: levels[n][level[n]] for n in group}
        counts: dict[str, int] = {}
        for t in texts.values():
            counts[t] = counts.get(t, 0) + 1
        dup = [n for n in group if counts[texts[n]] > 1 and level[n] + 1 < len(levels[n])]
        if len(set(texts.values())) == len(group) or not dup:
            break
        for n in dup:
            level[n] += 1
    if width is None:
        return texts
    apart = _fit_apart(texts, width)
    if apart is not None and not set(apart.values()) & others:
        return apart
    if len(set(texts.values())) == len(group) and not set(texts.values()) & others:
        return texts  # no cut keeps them apart: spelled out, wider than ``width``
    for n in group:
        level[n] = min(level[n] + 1, len(levels[n]) - 1)
    return {n: levels[n][level[n]] for n in group}
