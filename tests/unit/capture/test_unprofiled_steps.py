"""The un-profiled step time the env-var session keeps (capture/auto.py ``unprofiled_steps``): step
starts in, the durations of the steps after the first (it compiles) and before the profiler's out."""

from __future__ import annotations

from inductor_perf.capture.auto import unprofiled_steps


def test_steps_between_the_compile_and_the_profiler():
    # starts of steps 1..4 at 0, 2.0, 2.5, 2.75 s; step 4 is the profiler's: steps 2 and 3 are 0.5 and 0.25 s
    assert unprofiled_steps([0.0, 2.0, 2.5, 2.75]) == [500000.0, 250000.0]


def test_too_few_steps_give_none():
    # SKIP=2: steps 1 (compiles) and 2 (the profiler's); SKIP=1 or 0: step 1 only
    assert unprofiled_steps([0.0, 2.0]) == [] and unprofiled_steps([0.0]) == [] and unprofiled_steps([]) == []
