"""The un-profiled step time the env-var session keeps (capture/auto.py ``unprofiled_steps``): step
starts in, the durations of the steps after the first (it compiles) and before the profiler's out."""

from __future__ import annotations

from inductor_perf.capture.auto import unprofiled_steps


def test_steps_between_the_compile_and_the_profiler():
    # starts of steps 1..4 at 0, 2.0, 2.5, 2.75 s, 2 graphs compiled in step 1; step 4 is the profiler's:
    # steps 2 and 3 are 0.5 and 0.25 s
    assert unprofiled_steps([(0.0, 0), (2.0, 2), (2.5, 2), (2.75, 2)]) == [500000.0, 250000.0]


def test_steps_that_compiled_are_left_out():
    # step 2 (2.0 -> 4.0 s) recompiled two graphs (automatic dynamic shapes at the second shape): only
    # step 3 (4.0 -> 4.25 s) counts; the first step counts never, even served from a cache (no graph id)
    assert unprofiled_steps([(0.0, 2), (2.0, 2), (4.0, 4), (4.25, 4)]) == [250000.0]
    assert unprofiled_steps([(0.0, 2), (2.0, 2), (4.0, 4)]) == []


def test_too_few_steps_give_none():
    # SKIP=2: steps 1 (compiles) and 2 (the profiler's); SKIP=1 or 0: step 1 only
    assert unprofiled_steps([(0.0, 0), (2.0, 2)]) == [] and unprofiled_steps([(0.0, 0)]) == []
    assert unprofiled_steps([]) == []
