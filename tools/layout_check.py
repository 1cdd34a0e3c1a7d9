"""Measure the package layout against the rules in CONTRIBUTING.md ("Layout rules").

    python tools/layout_check.py [--json] [PACKAGE_DIR]

Checks, reading the source only (nothing is imported):
- import cycles between the package's modules, counting every intra-package import, also those inside
  functions (a lazy import is still a dependency); imports under ``if TYPE_CHECKING:`` do not count;
- modules over MAX_MODULE_LINES lines and functions (or methods) over MAX_FUNCTION_LINES lines;
- the modules that rename files into place (``os.replace``/``os.rename``/``Path.replace``/``.rename``):
  there must be exactly one.
Exit status 0 when every rule holds, 1 otherwise; the report names each offender.
"""

from __future__ import annotations

import argparse
import ast
import json
import sys
from pathlib import Path

MAX_MODULE_LINES = 600
MAX_FUNCTION_LINES = 100
RENAME_CALLS = {"replace", "rename"}


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


def _imports(tree: ast.AST, mod: str, is_pkg: bool, package: str) -> set[str]:
    """Intra-package modules imported anywhere in ``tree`` except under ``if TYPE_CHECKING``."""
    found: set[str] = set()
    base = mod.split(".") if is_pkg else mod.split(".")[:-1]

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.If) and _is_type_checking(node):
            for child in node.orelse:
                visit(child)
            return
        if isinstance(node, ast.ImportFrom):
            if node.level:
                anchor = base[: len(base) - (node.level - 1)]
                target = ".".join(anchor + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if target == package or target.startswith(package + "."):
                found.add(target)
                for alias in node.names:  # "from . import x" may name a submodule
                    found.add(f"{target}.{alias.name}")
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name == package or alias.name.startswith(package + "."):
                    found.add(alias.name)
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(tree)
    return found


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
    """Strongly connected components with more than one module (Tarjan), each sorted."""
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
        for w in graph.get(v, ()):
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


def check(root: Path) -> dict:
    package = root.name
    modules: dict[str, Path] = {}
    for path in sorted(root.rglob("*.py")):
        modules[module_name(path, root)] = path
    graph: dict[str, set[str]] = {}
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
        deps = _imports(tree, mod, path.name == "__init__.py", package)
        # a package import ("from . import x") names x only when x is a module of ours
        graph[mod] = {d for d in deps if d in modules and d != mod}
    # a package's __init__ re-exports lazily; it is the public face, not a stage: leave it out of cycles
    for mod in list(graph):
        graph[mod].discard(package)
    return {
        "modules": len(modules),
        "cycles": _cycles(graph),
        "long_modules": long_modules,
        "long_functions": long_functions,
        "renaming_modules": renamers,
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("package", nargs="?", default=str(Path(__file__).resolve().parents[1] / "inductor_perf"))
    ap.add_argument("--json", action="store_true", help="print the findings as JSON")
    args = ap.parse_args(argv)
    got = check(Path(args.package).resolve())
    ok = not got["cycles"] and not got["long_modules"] and not got["long_functions"] \
        and len(got["renaming_modules"]) == 1
    if args.json:
        print(json.dumps({**got, "ok": ok}, indent=1))
        return 0 if ok else 1
    print(f"{got['modules']} modules")
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
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
