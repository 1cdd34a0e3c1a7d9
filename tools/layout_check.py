"""Measure the package layout against the rules in CONTRIBUTING.md ("Layout rules").

    python tools/layout_check.py [--json] [PACKAGE_DIR]

Checks, reading the source only (nothing is imported):
- the layers (:data:`LAYERS`): a module of a subpackage never imports one of a higher layer, counting
  every intra-package import, also those inside functions (a lazy import is still a dependency) and
  those under ``if TYPE_CHECKING:`` (a type a lower layer names belongs below it); the core modules
  (:data:`CORE`) may be imported by all and import only each other; every subpackage and top-level
  module must have a place in the table;
- no import cycle between subpackages (lazy imports count, ``TYPE_CHECKING`` ones do not);
- no import of another subpackage's ``_private`` name (``from .x import _y``, or ``x._y`` of an imported
  module), the top-level modules each counting as one of their own;
- at most :data:`MAX_TOP_MODULES` modules at the package top;
- import cycles between the package's modules (lazy imports count, ``TYPE_CHECKING`` ones do not);
- modules over MAX_MODULE_LINES lines and functions (or methods, decorators and nested functions
  counted in) over MAX_FUNCTION_LINES lines;
- the modules that rename files into place (``os.replace``/``os.rename``/``Path.replace``/``.rename``):
  there must be exactly one.
Also reported: the longest chain of imports between modules (the module graph's depth), the longest
chain between subpackages (each top-level module counting as one), and the imports of another
module's ``_private`` name within one subpackage (allowed).
Exit status 0 when every rule holds, 1 otherwise; the report names each offender.
"""

from __future__ import annotations

import argparse
import ast
import json
import sys
from pathlib import Path

MAX_MODULE_LINES = 600
MAX_FUNCTION_LINES = 80
MAX_TOP_MODULES = 8
RENAME_CALLS = {"replace", "rename"}

# Read "a <- b" as "b may import a": a module may import its own layer and the layers below.
#   model <- traces, devices, roofline <- tagging, costs <- augment, summary <- report, ranks, capture,
#   comparison, advice <- the top (entry points: __init__, __main__, cli, backend)
LAYERS: dict[str, int] = {
    "model": 0,
    "traces": 1, "devices": 1, "roofline": 1,
    "tagging": 2, "costs": 2,
    "augment": 3, "summary": 3,
    "report": 4, "ranks": 4, "capture": 4, "comparison": 4, "advice": 4,
    "__init__": 5, "__main__": 5, "cli": 5, "backend": 5,
}
CORE = {"config", "errors", "compat"}
"""Top-level modules every layer may import (environment variables, exceptions, torch versions);
they import only each other."""


def module_name(path: Path, root: Path) -> str:
    rel = path.relative_to(root.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


class Imports:
    """What one module takes from the package: the modules it imports (``runtime``: outside
    ``if TYPE_CHECKING``; ``typing``: under it) and each name it takes from a module."""

    def __init__(self) -> None:
        self.runtime: set[str] = set()
        self.typing: set[str] = set()
        self.names: set[tuple[str, str]] = set()  # (module, name)


def _imports(tree: ast.AST, mod: str, is_pkg: bool, package: str, modules: set[str]) -> Imports:
    """The intra-package imports anywhere in ``tree``."""
    got = Imports()
    base = mod.split(".") if is_pkg else mod.split(".")[:-1]
    aliases: dict[str, str] = {}  # a local name bound to one of our modules

    def visit(node: ast.AST, typing: bool) -> None:
        if isinstance(node, ast.If) and _is_type_checking(node):
            for child in node.body:
                visit(child, True)
            for child in node.orelse:
                visit(child, typing)
            return
        into = got.typing if typing else got.runtime
        if isinstance(node, ast.ImportFrom):
            if node.level:
                anchor = base[: len(base) - (node.level - 1)]
                target = ".".join(anchor + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if target == package or target.startswith(package + "."):
                for alias in node.names:  # "from . import x" may name a submodule
                    sub = f"{target}.{alias.name}"
                    if sub in modules:
                        into.add(sub)
                        aliases[alias.asname or alias.name] = sub
                    else:  # a name the module (or the package's __init__) defines
                        into.add(target)
                        got.names.add((target, alias.name))
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name == package or alias.name.startswith(package + "."):
                    into.add(alias.name)
                    if alias.asname:
                        aliases[alias.asname] = alias.name
        for child in ast.iter_child_nodes(node):
            visit(child, typing)

    visit(tree, False)
    for node in ast.walk(tree):  # x._y of a module bound by an import
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in aliases:
            got.names.add((aliases[node.value.id], node.attr))
    return got


def _long_functions(tree: ast.AST, limit: int) -> list[tuple[str, int]]:
    out = []

    def visit(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                start = min([d.lineno for d in child.decorator_list] + [child.lineno])
                n = child.end_lineno - start + 1
                name = f"{prefix}{child.name}"
                if n > limit:
                    out.append((name, n))
                visit(child, name + ".")
            elif isinstance(child, ast.ClassDef):
                visit(child, f"{prefix}{child.name}.")
            else:
                visit(child, prefix)

    visit(tree, "")
    return out


def _renames(tree: ast.AST) -> int:
    n = 0
    for node in ast.walk(tree):
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                and node.func.attr in RENAME_CALLS):
            owner = node.func.value
            # os.replace / os.rename, or <path>.replace(<path>) with one argument; str.replace has two
            if isinstance(owner, ast.Name) and owner.id == "os":
                n += 1
            elif len(node.args) == 1 and not node.keywords and not isinstance(owner, ast.Constant):
                n += 1
    return n


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one node (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []
    counter = [0]

    def strong(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                strong(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    sys.setrecursionlimit(10_000)
    for v in sorted(graph):
        if v not in index:
            strong(v)
    return sorted(out)


def _longest_chain(graph: dict[str, set[str]]) -> list[str]:
    """The longest path of imports, first importer to last imported (on an acyclic graph; a cycle's
    back edge is not followed)."""
    best: dict[str, list[str]] = {}

    def chain(v: str, path: set[str]) -> list[str]:
        if v in best:
            return best[v]
        path.add(v)
        longest: list[str] = []
        for w in sorted(graph.get(v, ())):
            if w not in path:
                c = chain(w, path)
                if len(c) > len(longest):
                    longest = c
        path.discard(v)
        best[v] = [v, *longest]
        return best[v]

    sys.setrecursionlimit(10_000)
    return max((chain(v, set()) for v in sorted(graph)), key=len, default=[])


def group_of(mod: str, package: str) -> str:
    """The subpackage of a module (``pkg.summary.stream.loop`` -> ``summary``), or the top-level
    module's own name (``pkg.cli`` -> ``cli``; the package itself -> ``__init__``)."""
    parts = mod.split(".")[1:]
    return parts[0] if parts else "__init__"


def check(root: Path, layers: dict[str, int] | None = None, core: set[str] | None = None) -> dict:
    layers = LAYERS if layers is None else layers
    core = CORE if core is None else core
    package = root.name
    modules: dict[str, Path] = {}
    for path in sorted(root.rglob("*.py")):
        modules[module_name(path, root)] = path
    names = set(modules)
    graph: dict[str, set[str]] = {}  # runtime imports, module -> module
    every: dict[str, set[str]] = {}  # the same with TYPE_CHECKING imports
    taken: dict[str, set[tuple[str, str]]] = {}
    long_modules, long_functions, renamers = [], [], []
    for mod, path in modules.items():
        text = path.read_text()
        tree = ast.parse(text, str(path))
        lines = len(text.splitlines())
        if lines > MAX_MODULE_LINES:
            long_modules.append((mod, lines))
        long_functions += [(f"{mod}.{name}", n) for name, n in _long_functions(tree, MAX_FUNCTION_LINES)]
        if _renames(tree):
            renamers.append(mod)
        got = _imports(tree, mod, path.name == "__init__.py", package, names)
        # a package import ("from . import x") names x only when x is a module of ours
        graph[mod] = {d for d in got.runtime if d in modules and d != mod}
        every[mod] = graph[mod] | {d for d in got.typing if d in modules and d != mod}
        taken[mod] = got.names
    # a package's __init__ re-exports lazily; it is the public face, not a stage: leave it out of cycles
    for mod in list(graph):
        graph[mod].discard(package)

    top = sorted(m for m, p in modules.items() if p.parent == root)
    groups = sorted({group_of(m, package) for m in modules})
    unplaced = [g for g in groups if g not in layers and g not in core]

    def layer(g: str) -> int | None:
        return None if g in core else layers.get(g)

    layer_violations = []
    for mod in sorted(every):
        g = group_of(mod, package)
        for dep in sorted(every[mod]):
            d = group_of(dep, package)
            if d == g:
                continue
            if g in core and d not in core:
                layer_violations.append((mod, dep, f"core module {g} imports {d}"))
            elif layer(d) is not None and layer(g) is not None and layer(d) > layer(g):
                layer_violations.append((mod, dep, f"{g} (layer {layer(g)}) imports {d} (layer {layer(d)})"))
    group_graph: dict[str, set[str]] = {}
    for mod, deps in graph.items():
        g = group_of(mod, package)
        for dep in deps:
            d = group_of(dep, package)
            if d != g:
                group_graph.setdefault(g, set()).add(d)
    taken_private = {(mod, owner, name) for mod, pairs in taken.items() for owner, name in pairs
                     if name.startswith("_") and not name.startswith("__") and owner != mod}
    private = sorted({(mod, f"{owner}.{name}") for mod, owner, name in taken_private
                      if group_of(owner, package) != group_of(mod, package)})
    private_within = sorted((mod, f"{owner}.{name}") for mod, owner, name in taken_private
                            if group_of(owner, package) == group_of(mod, package))
    chain = _longest_chain(graph)
    group_chain = _longest_chain(group_graph)
    return {
        "modules": len(modules),
        "cycles": _cycles(graph),
        "long_modules": long_modules,
        "long_functions": long_functions,
        "renaming_modules": renamers,
        "top_modules": top,
        "unplaced": unplaced,
        "layer_violations": layer_violations,
        "subpackage_cycles": _cycles(group_graph),
        "private_imports": private,
        "private_within_subpackage": private_within,
        "depth": len(chain),
        "longest_chain": chain,
        "subpackage_depth": len(group_chain),
        "longest_subpackage_chain": group_chain,
    }


def passes(got: dict) -> bool:
    return (not got["cycles"] and not got["long_modules"] and not got["long_functions"]
            and len(got["renaming_modules"]) == 1 and len(got["top_modules"]) <= MAX_TOP_MODULES
            and not got["unplaced"] and not got["layer_violations"] and not got["subpackage_cycles"]
            and not got["private_imports"])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("package", nargs="?", default=str(Path(__file__).resolve().parents[1] / "inductor_perf"))
    ap.add_argument("--json", action="store_true", help="print the findings as JSON")
    args = ap.parse_args(argv)
    got = check(Path(args.package).resolve())
    ok = passes(got)
    if args.json:
        print(json.dumps({**got, "ok": ok}, indent=1))
        return 0 if ok else 1
    print(f"{got['modules']} modules, {len(got['top_modules'])} at the top (at most {MAX_TOP_MODULES})")
    if len(got["top_modules"]) > MAX_TOP_MODULES:
        print("  " + ", ".join(got["top_modules"]))
    print(f"subpackages or top-level modules with no layer: {len(got['unplaced'])}")
    for g in got["unplaced"]:
        print(f"  {g}: add it to LAYERS (or CORE)")
    print(f"imports of a higher layer: {len(got['layer_violations'])}")
    for mod, dep, why in got["layer_violations"]:
        print(f"  {mod} -> {dep}: {why}")
    print(f"import cycles between subpackages: {len(got['subpackage_cycles'])}")
    for c in got["subpackage_cycles"]:
        print("  " + " <-> ".join(c))
    print(f"imports of another subpackage's private name: {len(got['private_imports'])}")
    for mod, name in got["private_imports"]:
        print(f"  {mod} takes {name}")
    print(f"import cycles: {len(got['cycles'])}")
    for c in got["cycles"]:
        print("  " + " <-> ".join(c))
    print(f"modules over {MAX_MODULE_LINES} lines: {len(got['long_modules'])}")
    for m, n in got["long_modules"]:
        print(f"  {m}: {n}")
    print(f"functions over {MAX_FUNCTION_LINES} lines: {len(got['long_functions'])}")
    for f, n in got["long_functions"]:
        print(f"  {f}: {n}")
    print(f"modules that rename files into place: {len(got['renaming_modules'])} (want 1)")
    for m in got["renaming_modules"]:
        print(f"  {m}")
    print(f"longest import chain: {got['depth']} modules")
    print("  " + " -> ".join(m.split(".", 1)[-1] if "." in m else m for m in got["longest_chain"]))
    print(f"longest chain between subpackages (a top-level module counts as one): {got['subpackage_depth']}")
    print("  " + " -> ".join(got["longest_subpackage_chain"]))
    print(f"imports of another module's private name within its subpackage (allowed): "
          f"{len(got['private_within_subpackage'])}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
