"""One home per rule: a value or rule defined once is not defined again elsewhere in the package, and
no module writes another module's global. Reads the source only (ast), as tools/layout_check.py does;
each check is also run on a made-up snippet, so that a pass means something."""

from __future__ import annotations

import ast
import pathlib

PKG = pathlib.Path(__file__).resolve().parents[2] / "inductor_perf"

ENGINE_NAMES = {"auto", "full", "stream"}
LARGE = 50_000_000
RUNTIME_CATEGORIES = {"cuda_runtime", "cuda_driver", "hip_runtime", "runtime"}
COST_MARK_NAMES = {"KERNEL_FLOP", "COST_SOURCE", "LAUNCH_OP"}
ROW_LABELS = {"(root module)", "(no module)", "(no source)", "(no host event)", "(launching thread unknown)",
              "(unattributed)", "(outside model)", "(runtime overhead)", "(grad accumulation)", "(unknown)",
              "(no source info)"}

HOMES = {"engines": "traces/engines.py", "threshold": "traces/engines.py", "runtime categories": "model/events.py",
         "cost marks": "model/events.py", "row labels": "model/events.py"}


def _modules() -> dict[str, ast.AST]:
    return {p.relative_to(PKG).as_posix(): ast.parse(p.read_text(encoding="utf-8"))
            for p in sorted(PKG.rglob("*.py"))}


def _docstrings(tree: ast.AST) -> set[int]:
    out = set()
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if isinstance(body, list):
            for stmt in body:  # a module's, class's or function's docstring, and attribute docstrings
                if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant):
                    out.add(id(stmt.value))
    return out


def _element_name(e: ast.AST) -> str | None:
    if isinstance(e, ast.Attribute):
        return e.attr
    if isinstance(e, ast.Name):
        return e.id
    return None


def definitions(tree: ast.AST) -> dict[str, int]:
    """What of each rule ``tree`` defines: how many times."""
    found = dict.fromkeys(HOMES, 0)
    docs = _docstrings(tree)
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and id(node) not in docs:
            v = node.value
            if type(v) in (int, float) and v == LARGE:
                found["threshold"] += 1
            elif isinstance(v, str) and v in RUNTIME_CATEGORIES:
                found["runtime categories"] += 1
            elif isinstance(v, str) and v in ROW_LABELS:
                found["row labels"] += 1
        elif isinstance(node, (ast.Tuple, ast.List, ast.Set)):
            consts = {e.value for e in node.elts if isinstance(e, ast.Constant)}
            if consts == ENGINE_NAMES and len(node.elts) == 3:
                found["engines"] += 1
            if {_element_name(e) for e in node.elts} >= COST_MARK_NAMES or consts >= {"kernel_flop", "cost_source",
                                                                                      "launch_op"}:
                if len(node.elts) <= 4:  # the marks (with another key at most), not a list of every arg key
                    found["cost marks"] += 1
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if any(isinstance(t, ast.Name) and t.id == "ENGINES" for t in targets):
                found["engines"] += 1
    return found


def test_each_rule_is_defined_in_its_home_only():
    where: dict[str, list[str]] = {rule: [] for rule in HOMES}
    for rel, tree in _modules().items():
        for rule, n in definitions(tree).items():
            if n:
                where[rule].append(rel)
    assert {rule: sorted(set(files)) for rule, files in where.items()} == {r: [h] for r, h in HOMES.items()}


def test_definitions_finds_each_kind_of_copy():
    snippet = ast.parse('''
"""a docstring may say "cuda_runtime" and "(no module)" and 50_000_000"""
ENGINES = ("auto", "full", "stream")
SIZE = 50_000_000
CATS = ("cuda_runtime", "hip_runtime")
_MARKS = (evs.KERNEL_FLOP, evs.COST_SOURCE, evs.LAUNCH_OP)
label = "(no module)"
''')
    assert definitions(snippet) == {"engines": 2, "threshold": 1, "runtime categories": 2, "cost marks": 1,
                                    "row labels": 1}
    assert definitions(ast.parse('x = 1\n"""(no module) 50000000 cuda_runtime"""\n')) == dict.fromkeys(HOMES, 0)


def _module_names(tree: ast.AST, rel: str) -> set[str]:
    """The local names bound to a module of the package by ``tree``'s imports (``rel``: its path)."""
    here = rel.split("/")[:-1]
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            base = here[:len(here) - node.level + 1] if node.level else []
            if not node.level and not (node.module or "").startswith("inductor_perf"):
                continue
            parts = base + (node.module.split(".") if node.module else [])
            if not node.level:
                parts = parts[1:]  # inductor_perf.x -> x
            for a in node.names:
                path = PKG.joinpath(*parts, a.name)
                if path.with_suffix(".py").is_file() or (path / "__init__.py").is_file():
                    out.add(a.asname or a.name)
        elif isinstance(node, ast.Import):
            for a in node.names:
                if a.name.startswith("inductor_perf") and a.asname:
                    out.add(a.asname)
    return out


def foreign_writes(tree: ast.AST, rel: str) -> list[str]:
    """``alias.NAME = ...`` (or ``+=``, ``del``, ``setattr(alias, ...)``) where ``alias`` is another module
    of the package."""
    mods = _module_names(tree, rel)
    out = []
    for node in ast.walk(tree):
        targets: list[ast.AST] = []
        if isinstance(node, ast.Assign):
            targets = node.targets
        elif isinstance(node, (ast.AugAssign, ast.AnnAssign)):
            targets = [node.target]
        elif isinstance(node, ast.Delete):
            targets = node.targets
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("setattr", "delattr")
              and node.args and isinstance(node.args[0], ast.Name) and node.args[0].id in mods):
            out.append(f"{rel}:{node.lineno}")
        for t in targets:
            if isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name) and t.value.id in mods:
                out.append(f"{rel}:{node.lineno}")
    return out


def test_no_module_writes_another_modules_global():
    assert [w for rel, tree in _modules().items() for w in foreign_writes(tree, rel)] == []


def test_foreign_writes_finds_each_form():
    snippet = ast.parse("from ..traces import files as tf\nfrom . import core\nimport os\n"
                        "def f():\n    tf.LEFT_TO_EXIT = []\n    core.X += 1\n    setattr(tf, 'Y', 2)\n"
                        "    os.environ = {}\n    local = object()\n    local.x = 1\n")
    assert foreign_writes(snippet, "summary/files.py") == ["summary/files.py:5", "summary/files.py:6",
                                                           "summary/files.py:7"]
