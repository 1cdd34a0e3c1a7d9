"""The pure parts of `make bench` (bench/bench_stats.py): statistics of paired rounds, verdicts, and the
rewrite of docs/benchmarks.md that must keep the hand-written sections. Expected numbers are worked
out by hand in the comments; nothing here is timed."""

from __future__ import annotations

import os
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "bench"))
import bench_stats as bs  # noqa: E402


def test_spread_median_range_quartiles() -> None:
    s = bs.spread([3.0, 1.0, 2.0, 10.0])
    # sorted 1, 2, 3, 10: median (2 + 3) / 2; inclusive quartiles at positions 0.75 and 2.25:
    # 1 + 0.75·(2 − 1) = 1.75 and 3 + 0.25·(10 − 3) = 4.75
    assert s == {"median": 2.5, "min": 1.0, "max": 10.0, "q1": 1.75, "q3": 4.75, "n": 4}
    assert bs.spread([7.0]) == {"median": 7.0, "min": 7.0, "max": 7.0, "q1": 7.0, "q3": 7.0, "n": 1}
    with pytest.raises(ValueError):
        bs.spread([])


def test_paired_ratios_are_per_round() -> None:
    # the median of per-round ratios is not the ratio of medians: rounds (2/1, 3/3, 8/2) -> 2, 1, 4
    r = bs.paired_ratios([2.0, 3.0, 8.0], [1.0, 3.0, 2.0])
    assert r == [2.0, 1.0, 4.0]
    assert bs.spread(r)["median"] == 2.0
    with pytest.raises(ValueError, match="differ"):
        bs.paired_ratios([1.0], [1.0, 2.0])


def test_verdict_and_figure_result() -> None:
    assert bs.verdict(10.0, ">=", 10) == "PASS" and bs.verdict(9.99, ">=", 10) == "FAIL"
    assert bs.verdict(0.5, "<=", 0.5) == "PASS" and bs.verdict(0.51, "<=", 0.5) == "FAIL"
    with pytest.raises(ValueError):
        bs.verdict(1.0, "<", 2.0)
    f = bs.Figure("s", "speed", "s", bs.spread([1.0]), bs.spread([12.0]), "base", bs.spread([12.0, 8.0, 11.0]),
                  "base/ours", (">=", 10))
    assert f.result() == "PASS"  # median of 8, 11, 12 is 11
    f.applies = False
    assert f.result().startswith("n/a")
    mem = bs.Figure("s", "rss", "MB", bs.spread([1200.0]), target=("<=", 1000), target_on="ours")
    assert mem.result() == "FAIL"
    exact = bs.Figure("s", "flops", "", bs.spread([5.0]), bs.spread([5.0]), "ref", exact=True)
    assert exact.result() == "PASS" and exact.target_text() == "equal to ref"
    exact.ours = bs.spread([6.0])
    assert exact.result() == "FAIL"
    assert bs.Figure("s", "no target", "s", bs.spread([1.0])).result() == "—"


def test_fmt_spread() -> None:
    assert bs.fmt_spread(bs.spread([1.0, 2.0, 4.0]), "s") == "2.000 s (1.000–4.000, n=3)"
    assert bs.fmt_spread(bs.spread([12345.0]), "B") == "12,345 B (1 run)"
    assert bs.fmt_spread(None) == "—"


HAND = """# Benchmarks

How to run it.

## Offline augment at scale

A hand-written paragraph with a table:

| a | b |
|---|---|
| 1 | 2 |
"""


def test_replace_generated_inserts_then_replaces_keeping_hand_sections() -> None:
    once = bs.replace_generated(HAND, "## Figures\n\nfirst run")
    assert once.startswith("# Benchmarks\n\nHow to run it.\n\n" + bs.BEGIN + "\n## Figures\n\nfirst run\n" + bs.END)
    assert once.endswith(HAND.split("How to run it.\n\n", 1)[1])  # every hand-written byte after it kept
    twice = bs.replace_generated(once, "## Figures\n\nsecond run")
    assert "first run" not in twice and "second run" in twice
    assert twice.replace("second run", "first run") == once  # only the generated part changed
    assert twice.count(bs.BEGIN) == 1 and twice.count(bs.END) == 1


def test_replace_generated_rejects_a_broken_marker_pair() -> None:
    with pytest.raises(ValueError, match="END"):
        bs.replace_generated("# B\n\n" + bs.BEGIN + "\nno end", "x")


def test_the_doc_has_one_generated_part() -> None:
    doc = open(os.path.join(os.path.dirname(__file__), "..", "..", "docs", "benchmarks.md")).read()
    assert doc.count(bs.BEGIN) == 1 and doc.count(bs.END) == 1
    assert doc.index(bs.BEGIN) < doc.index(bs.END) < doc.index("## Offline augment at scale")


def test_caches_seen_names_every_distinct_answer_with_its_rounds() -> None:
    hit = {"aot_hit": 1, "aot_miss": 0, "fx_hit": 2, "fx_miss": 0}
    miss = {"aot_hit": 0, "aot_miss": 1, "fx_hit": 2, "fx_miss": 0}
    text = bs.caches_seen({"inductor": [hit, hit, hit], "inductor_perf": [hit, miss, hit]})
    assert text == ("inductor: AOTAutograd cache 1 hit / 0 miss, FX graph cache 2 hit / 0 miss (all 3 of 3 rounds); "
                    "inductor_perf: AOTAutograd cache 1 hit / 0 miss, FX graph cache 2 hit / 0 miss (2 of 3 rounds); "
                    "AOTAutograd cache 0 hit / 1 miss, FX graph cache 2 hit / 0 miss (1 of 3 rounds)")
