"""The pieces of tagging.aot_cache that need no compile (the two-process behaviour is
tests/integration/test_aot_cache.py): a served backward's registration at its first call."""

from __future__ import annotations

import threading

import pytest

from inductor_perf.tagging.aot_cache import on_first_call


class _Compiled:
    """What on_first_call touches of a CompiledFxGraph: its boxed callable."""

    def __init__(self) -> None:
        self.calls: list[list[int]] = []
        self.current_callable = self._run

    def _run(self, inputs: list[int]) -> int:
        self.calls.append(list(inputs))
        return sum(inputs)

    def __call__(self, inputs: list[int]) -> int:  # as CompiledFxGraph.__call__
        return self.current_callable(inputs)


def test_registers_once_before_the_first_call_then_gets_out_of_the_way() -> None:
    compiled, seen = _Compiled(), []
    original = compiled.current_callable
    on_first_call(compiled, lambda: seen.append(list(compiled.calls)))
    assert seen == [] and compiled.current_callable is not original  # nothing registered before a call
    assert compiled([1, 2]) == 3
    assert seen == [[]]  # registered before the call ran
    assert compiled.current_callable == original  # later calls go straight to the graph
    assert compiled([4]) == 4 and seen == [[]] and compiled.calls == [[1, 2], [4]]


def test_registration_may_install_the_marker_the_first_call_goes_through() -> None:
    compiled, marked = _Compiled(), []
    inner = compiled.current_callable

    def register() -> None:  # as instrument(): wrap the callable
        def marker(inputs):
            marked.append(list(inputs))
            return inner(inputs)
        compiled.current_callable = marker

    on_first_call(compiled, register)
    compiled([5])
    compiled([6])
    assert marked == [[5], [6]] and compiled.calls == [[5], [6]]


def test_a_failing_registration_never_breaks_the_call(caplog) -> None:
    compiled = _Compiled()

    def register() -> None:
        raise RuntimeError("no tags")

    on_first_call(compiled, register)
    with caplog.at_level("WARNING", logger="inductor_perf.tagging.aot_cache"):
        assert compiled([2, 3]) == 5
    assert "no tags" in caplog.text


def test_concurrent_first_calls_register_once() -> None:
    compiled, seen = _Compiled(), []
    gate = threading.Barrier(4)

    def register() -> None:
        seen.append(1)

    on_first_call(compiled, register)

    def call() -> None:
        gate.wait()
        compiled([1])

    threads = [threading.Thread(target=call) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert seen == [1] and len(compiled.calls) == 4


def test_a_graph_without_a_callable_is_refused() -> None:
    compiled = _Compiled()
    compiled.current_callable = None
    with pytest.raises(ValueError):
        on_first_call(compiled, lambda: None)
