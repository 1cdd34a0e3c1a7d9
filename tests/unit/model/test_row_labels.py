"""Row labels (model.events): the summary's module and line tables and the collectives view's compute
time by module and line put a kernel in the same row, by the one rule (module_row, line_row)."""

from __future__ import annotations

from inductor_perf.model import events as evs
from inductor_perf.summary import comm
from inductor_perf.summary.core import static_sums
from inductor_perf.summary.kernels import ParsedEvent

# module_path "" is the top-level forward itself; a missing arg is unknown; so is an empty source line
CASES = [({"module_path": "", "source": "m.py:3"}, "(root module)", "m.py:3"),
         ({"module_path": "fc", "source": ""}, "fc", "(no source)"),
         ({"module_path": None, "source": 7}, "(no module)", "(no source)"),
         ({}, "(no module)", "(no source)")]


def test_summary_tables_and_collectives_view_share_the_rows():
    kernels = [ParsedEvent("k", "kernel", 0, 7, 10.0 * i, 1.0 + i, args) for i, (args, _, _) in enumerate(CASES)]
    modules = [m for _, m, _ in CASES]
    lines = [ln for _, _, ln in CASES]
    assert [evs.module_row(a.get("module_path")) for a, _, _ in CASES] == modules
    assert [evs.line_row(a.get("source")) for a, _, _ in CASES] == lines
    # the summary's tables: the module-table and line-table keys of static_sums
    assert [static_sums(k.args)[6:8] for k in kernels] == list(zip(modules, lines))
    # the collectives view (kernels of 1, 2, 3, 4 µs): "(no module)" 3 + 4 µs, "(no source)" 2 + 3 + 4 µs
    assert comm._by_key(kernels, {}, evs.MODULE_PATH) == {"(no module)": 7.0, "fc": 2.0, "(root module)": 1.0}
    assert comm._by_key(kernels, {}, evs.SOURCE) == {"(no source)": 9.0, "m.py:3": 1.0}


def test_the_comparison_special_keys():
    assert evs.SPECIAL_KEYS == ("(outside model)", "(runtime overhead)", "(grad accumulation)", "(unknown)")
