"""Every code example in README.md and docs/*.md runs (or, for shell lines that set up machines or take
half an hour, is checked against what it names).

How each fenced block is treated, by its language tag:

- ``python``: run in a fresh process, in an empty folder. A block that needs names a reader would have
  (``model``, ``loader``, a trace path) says so with ``<!-- example: NAME -->`` on the line before it;
  ``NAME`` picks a prelude below, which may add checks after the block (the example's claim, asserted).
  A block for machines the tests do not have (``<!-- example: needs-slurm -->``: SLURM, dask-jobqueue)
  is checked, not run: it compiles, and every name it imports from inductor_perf exists.
- ``json`` / ``toml``: device rows (docs/devices.md); each must load as an override.
- ``bash``: every command line is checked: ``inductor-perf``/``python -m inductor_perf`` lines parse
  with the real argument parser (placeholders such as ``TRACE`` stand for the user's files), a ``make``
  target exists (``make -n``), a script of ours exists and answers ``--help``, an ``INDUCTOR_PERF_*``
  variable is one config.py reads; installs (``pip``, ``apt-get``) and shell built-ins are not run.
  The README's first command, ``make demo``, is run for real (test_make_demo_command).
- ``text``: output shown, not code. A block with no tag fails: say what it is.
"""

from __future__ import annotations

import glob
import os
import re
import shlex
import subprocess
import sys
from dataclasses import dataclass

import pytest

pytestmark = pytest.mark.slow

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SHARED_TRACES = os.path.join(REPO, "..", "shared", "traces")
DOCS = ["README.md", *sorted(os.path.relpath(p, REPO) for p in glob.glob(os.path.join(REPO, "docs", "*.md")))]
FENCE = re.compile(r"^(?P<indent>[ ]*)```(?P<lang>[^\n`]*)\n(?P<body>.*?)^(?P=indent)```[ ]*$", re.S | re.M)
EXAMPLE = re.compile(r"<!--\s*example:\s*(?P<name>[\w-]+)\s*-->\s*$")
LANGS = {"python", "bash", "json", "toml", "text"}


@dataclass
class Block:
    doc: str
    line: int
    lang: str
    body: str
    example: str | None

    @property
    def id(self) -> str:
        return f"{self.doc}:{self.line}"


def _blocks() -> list[Block]:
    out = []
    for doc in DOCS:
        text = open(os.path.join(REPO, doc), encoding="utf-8").read()
        for m in FENCE.finditer(text):
            line = text.count("\n", 0, m.start()) + 1
            before = text[:m.start()].rstrip("\n").rsplit("\n", 1)[-1]
            named = EXAMPLE.search(before)
            body = "\n".join(ln[len(m.group("indent")):] for ln in m.group("body").splitlines())
            out.append(Block(doc, line, m.group("lang").strip(), body, named.group("name") if named else None))
    return out


BLOCKS = _blocks()

# --- python ---------------------------------------------------------------------------------------
TRAINING = '''
import torch, torch.nn as nn, torch.nn.functional as F
torch.manual_seed(0)
model = torch.compile(nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 10)), backend="inductor_perf")
opt = torch.optim.SGD(model.parameters(), lr=0.01)
loader = [(torch.randn(32, 64), torch.randint(0, 10, (32,))) for _ in range(3)]
def train_step(batch):
    x, y = batch
    F.cross_entropy(model(x), y).backward()
    opt.step(); opt.zero_grad()
'''
DYNAMIC = '''
import torch, torch.nn as nn
model = torch.compile(nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 8)), backend="inductor_perf",
                      dynamic=True)
for n in (4, 6):
    model(torch.randn(n, 32)).sum().backward()
'''

# name -> (prelude, epilogue, argv)
PRELUDES: dict[str, tuple[str, str, list[str]]] = {
    # README: the one-line change: the compiled model must run.
    "a-model": ("import torch\nmodel = torch.nn.Linear(8, 4)\n",
                "assert model(torch.randn(2, 8)).shape == (2, 4)\n", []),
    # README: profile() around a loop: the files it names exist and each p.step() is a step.
    "training-loop": (TRAINING, '''
import os
r = p.result
assert r.warnings == [], r.warnings
for path in (r.trace_path, r.summary_txt_path, r.summary_json_path, r.report_path):
    assert path and os.path.exists(path), path
assert len(r.summary.steps) == len(loader), (len(r.summary.steps), len(loader))
''', []),
    # README and docs/costs.md: the compile-time table of a model compiled with dynamic shapes.
    "compiled-dynamic": (DYNAMIC, "", []),
    # docs/compare.md: a model and its input.
    "model-and-input": ("import torch, torch.nn as nn\nmodel = nn.Sequential(nn.Linear(16, 32), nn.ReLU())\n"
                        "x = torch.randn(4, 16)\n", "", []),
    # docs/report.md, docs/roofline.md: scripts given a trace path; an augmented CPU trace of ours.
    "argv-augmented-trace": ("", "", ["@augmented"]),
    # docs/ranks.md: one trace per rank (the two real ranks of ../shared/traces/two_ranks); the view has
    # both. Guarded: a Dask LocalCluster starts its workers by re-importing this script.
    "rank-traces": ("import glob\npaths = sorted(glob.glob(" + repr(os.path.join(SHARED_TRACES, "two_ranks", "*.json.gz"))
                    + "))\nassert len(paths) == 2, paths\n",
                    "if __name__ == '__main__':\n    assert view.ranks_present == [0, 1], view.ranks_present\n", []),
}
CHECKED_ONLY = {"needs-slurm": "SLURM and dask-jobqueue are not on the machines the tests run on"}
"""Blocks compiled and their ``inductor_perf`` imports resolved, not run (module docstring)."""


def _python_blocks() -> list[Block]:
    return [b for b in BLOCKS if b.lang == "python"]


@pytest.fixture(scope="module")
def augmented_trace(tmp_path_factory: pytest.TempPathFactory) -> str:
    """An augmented CPU trace made by the CLI from the committed compiled-MLP fixture."""
    out = str(tmp_path_factory.mktemp("docs") / "mlp.trace.json.gz")
    src = os.path.join(REPO, "tests", "fixtures", "mlp_cpu_compiled.trace.json")
    proc = subprocess.run([sys.executable, "-m", "inductor_perf", "augment", src, "-o", out],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    return out


@pytest.mark.parametrize("block", _python_blocks(), ids=lambda b: b.id)
def test_python_example_runs(block: Block, tmp_path: object, augmented_trace: str) -> None:
    if block.example in CHECKED_ONLY:
        return _check_unrun_block(block)
    if block.example is not None:
        assert block.example in PRELUDES, f"{block.id}: <!-- example: {block.example} --> names no prelude"
    if block.example == "rank-traces" and not os.path.isdir(os.path.join(SHARED_TRACES, "two_ranks")):
        pytest.skip("../shared/traces/two_ranks is absent (real GPU traces)")
    prelude, epilogue, argv = PRELUDES.get(block.example or "", ("", "", []))
    argv = [augmented_trace if a == "@augmented" else a for a in argv]
    script = os.path.join(str(tmp_path), "example.py")  # a real file: FX records source lines
    with open(script, "w") as f:
        f.write(f"import sys\nsys.argv = {['example.py', *argv]!r}\n{prelude}\n{block.body}\n{epilogue}")
    env = dict(os.environ)
    env.pop("INDUCTOR_PERF_TRACE_DIR", None)
    proc = subprocess.run([sys.executable, "-W", "error::UserWarning", script], cwd=str(tmp_path), env=env,
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, f"{block.id}:\n{block.body}\n--- stderr:\n{proc.stderr[-4000:]}"


def _check_unrun_block(block: Block) -> None:
    """A block for machines the tests lack (:data:`CHECKED_ONLY`): it compiles, and what it imports from
    inductor_perf exists."""
    import ast
    import importlib

    tree = ast.parse(block.body, filename=block.id)
    compile(tree, block.id, "exec")
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "inductor_perf":
            module = importlib.import_module(node.module)  # type: ignore[arg-type]
            for alias in node.names:
                assert hasattr(module, alias.name), f"{block.id}: {node.module} has no {alias.name}"


# --- device rows ----------------------------------------------------------------------------------
@pytest.mark.parametrize("block", [b for b in BLOCKS if b.lang in ("json", "toml")], ids=lambda b: b.id)
def test_device_row_example_loads(block: Block, tmp_path: object) -> None:
    from inductor_perf.devices.resolve import parse_device_overrides

    path = os.path.join(str(tmp_path), f"rows.{block.lang}")
    with open(path, "w") as f:
        f.write(block.body)
    rows = parse_device_overrides(path)
    names = re.findall(r'"?name"?\s*[:=]\s*"([^"]+)"', block.body)
    assert [r.name for r in rows] == names


# --- shell ----------------------------------------------------------------------------------------
SETUP_COMMANDS = {"pip", "apt-get", "export", "cd", "sudo", "git"}
"""Machine set-up and shell built-ins: shown for the reader to run once, not run by a test."""
USER_PLACEHOLDERS = {"train.py", "place_demo.py"}
"""Scripts a line stands for that are not in the repository: the user's own (the README's quickstart runs
``python train.py``) or one a page shows in full below the line (docs/roofline.md's place_demo.py, run as
a python block)."""


def _commands(body: str) -> list[list[str]]:
    text = re.sub(r"\\\n\s*", " ", body)
    out = []
    for line in text.splitlines():
        line = line.split(" #", 1)[0].strip()
        if not line or line.startswith("#"):
            continue
        words = shlex.split(line, comments=True)
        while "&&" in words:  # one command at a time
            i = words.index("&&")
            out.append(words[:i])
            words = words[i + 1:]
        out.append(words)
    return out


def _cli_parser():  # type: ignore[no-untyped-def]
    from inductor_perf.cli import build_parser

    return build_parser()


def _check_cli_args(args: list[str], where: str) -> None:
    """Optional parts of a synopsis (``[--seconds S]``) are taken as given; the parser must accept the rest."""
    flat = [a.strip("[]").split("|")[0] for a in args]  # "--by module|line|op": one of the choices
    flat = [a for a in flat if a]
    # A placeholder value after an option (``--seconds S``, ``-o OUT``) stands for any valid one.
    flat = [("1" if i and flat[i - 1].startswith("-") and re.fullmatch(r"[A-Z][A-Z0-9_]*", a) else a)
            for i, a in enumerate(flat)]
    parser = _cli_parser()
    try:
        parser.parse_args(flat)
    except SystemExit as e:
        raise AssertionError(f"{where}: inductor-perf {' '.join(flat)!r} does not parse (exit {e.code})")


def _strip_env(words: list[str], where: str) -> list[str]:
    from inductor_perf import config

    known = {v for k, v in vars(config).items() if k.isupper() and isinstance(v, str)}
    while words and re.match(r"^[A-Z_][A-Z0-9_]*=", words[0]):
        var = words.pop(0).split("=", 1)[0]
        if var.startswith("INDUCTOR_PERF_"):
            assert var in known, f"{where}: {var} is not read by inductor_perf/config.py"
    return words


def _check_command(words: list[str], where: str) -> None:
    words = _strip_env(words, where)
    if not words or words[0] in SETUP_COMMANDS or words[0] in ("/usr/bin/time",) and not words[1:]:
        return
    if words[0] == "/usr/bin/time":
        words = words[1:]
    prog = words[0]
    if prog == "inductor-perf":
        return _check_cli_args(words[1:], where)
    if prog == "make":
        proc = subprocess.run(["make", "-n", *words[1:]], cwd=REPO, capture_output=True, text=True, timeout=60)
        assert proc.returncode == 0, f"{where}: make {' '.join(words[1:])}: {proc.stderr}"
        return
    if prog.endswith("python") or prog.endswith("python3"):
        rest = words[1:]
        if rest[:2] == ["-m", "inductor_perf"]:
            return _check_cli_args(rest[2:], where)
        if rest[:2] == ["-m", "pip"] or rest[:2] == ["-m", "pytest"]:
            return
        script = rest[0]
        if script in USER_PLACEHOLDERS:
            return
        path = os.path.join(REPO, script)
        assert os.path.isfile(path), f"{where}: {script} is not in the repository"
        if script.endswith(".py") and script.startswith(("tools/", "bench/")):
            proc = subprocess.run([sys.executable, path, "--help"], cwd=REPO, capture_output=True, text=True,
                                  timeout=120)
            assert proc.returncode == 0, f"{where}: {script} --help: {proc.stderr[-1000:]}"
        return
    if prog == "dask":  # the Dask CLI (the dask extra): its subcommand exists here
        proc = subprocess.run([sys.executable, "-m", "dask", words[1], "--help"], capture_output=True, text=True,
                              timeout=120)
        assert proc.returncode == 0, f"{where}: dask {words[1]} --help: {proc.stderr[-1000:]}"
        return
    if prog.startswith(("tools/", ".ci/")):
        assert os.path.isfile(os.path.join(REPO, prog)), f"{where}: {prog} is not in the repository"
        return
    raise AssertionError(f"{where}: no rule to check the command {' '.join(words)!r}: add one to this test")


@pytest.mark.parametrize("block", [b for b in BLOCKS if b.lang == "bash"], ids=lambda b: b.id)
def test_shell_example_names_what_exists(block: Block) -> None:
    for words in _commands(block.body):
        _check_command(words, block.id)


def test_every_block_says_what_it_is() -> None:
    untagged = [f"{b.id} ({b.lang or 'no tag'})" for b in BLOCKS if b.lang not in LANGS]
    assert untagged == [], f"tag each as one of {sorted(LANGS)}: {untagged}"


def test_text_synopsis_lines_parse() -> None:
    """Command synopses shown as text (README's "Command line": ``inductor-perf diff A B [--by ...]``, a
    description after two spaces) name subcommands and options the parser has."""
    for block in (b for b in BLOCKS if b.lang == "text"):
        for line in block.body.splitlines():
            if line.startswith("inductor-perf "):
                _check_cli_args(shlex.split(re.split(r"\s{2,}", line)[0])[1:], block.id)


def test_make_demo_command(tmp_path: object) -> None:
    """``make demo``'s command (the README's first): the demo trains, captures, and prints a summary."""
    out = os.path.join(str(tmp_path), "inductor_perf_out")
    env = dict(os.environ, INDUCTOR_PERF_TRACE_DIR=out)
    proc = subprocess.run([sys.executable, "-W", "error::UserWarning", os.path.join(REPO, "examples", "demo.py")],
                          cwd=str(tmp_path), env=env, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert "Device busy" in proc.stdout and glob.glob(os.path.join(out, "*.report.html")), proc.stdout[-2000:]
