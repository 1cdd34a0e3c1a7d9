"""Tagging never breaks a compile: an injected failure leaves Inductor's result, warns once, and
records the graphs as untagged."""

from __future__ import annotations

import logging

import torch
from conftest import make, run_compiled

import inductor_perf.tagging.compiler as compiler
import inductor_perf.tagging.store as tag_store


def test_injected_failure_falls_back(monkeypatch, caplog, mlp_inductor) -> None:
    monkeypatch.setenv("INDUCTOR_PERF_INJECT_TAGGING_FAILURE", "1")
    monkeypatch.setattr(compiler, "_warned", False)  # the warning is once per process
    caplog.set_level(logging.DEBUG, logger="inductor_perf")
    # Dynamo would reuse the code it compiled for another MLP instance with the same backend
    # (mlp_perf): start from an empty Dynamo cache so this model really compiles.
    torch._dynamo.reset()
    model, inputs = make("mlp")
    # An FX graph cache hit would skip codegen (and so the injected failure): compile cold.
    # (config.patch, not monkeypatch: undoing monkeypatch on Inductor's config deletes the key.)
    with torch._inductor.config.patch(fx_graph_cache=False):
        run = run_compiled(model, inputs, "inductor_perf")

    # Same numbers as plain Inductor on the same model and inputs.
    torch.testing.assert_close(run.output, mlp_inductor.output)
    assert run.grads.keys() == mlp_inductor.grads.keys()
    for key in run.grads:
        torch.testing.assert_close(run.grads[key], mlp_inductor.grads[key])

    assert len(run.graphs) == 2  # forward and backward both failed to tag
    for g in run.graphs:
        assert g.tagged is False
        assert g.error and "injected tagging failure" in g.error
        assert g.kernels == []
    ours = [r for r in caplog.records if r.name.startswith("inductor_perf")]
    warnings = [r for r in ours if r.levelno == logging.WARNING]
    assert len(warnings) == 1, [r.getMessage() for r in warnings]
    assert "tagging failed" in warnings[0].getMessage()
    # the second failure is still logged, at debug level
    assert sum(1 for r in ours if r.levelno == logging.DEBUG and "tagging failed" in r.getMessage()) == 1


def test_tagging_can_be_turned_off(mlp_inductor) -> None:
    model, inputs = make("mlp")
    run = run_compiled(model, inputs, "inductor_perf", options={"inductor_perf.tagging": False})
    torch.testing.assert_close(run.output, mlp_inductor.output)
    assert run.graphs == []  # nothing registered: plain compile_fx


def test_tag_store_failure_keeps_the_tags(monkeypatch, caplog) -> None:
    def full_disk(graph):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(tag_store, "store", full_disk)
    monkeypatch.setattr(compiler, "_warned", False)
    caplog.set_level(logging.WARNING, logger="inductor_perf")
    torch._dynamo.reset()
    # Sizes no other test uses: the FX graph cache must miss so that tags are stored.
    model = torch.nn.Sequential(torch.nn.Linear(13, 7), torch.nn.ReLU(), torch.nn.Linear(7, 3))
    run = run_compiled(model, (torch.randn(5, 13),), "inductor_perf")
    assert len(run.graphs) == 2
    for g in run.graphs:
        assert g.tagged is True and g.kernels
    warnings = [r.getMessage() for r in caplog.records if r.name.startswith("inductor_perf")]
    assert len(warnings) == 1 and "could not store kernel tags" in warnings[0]
