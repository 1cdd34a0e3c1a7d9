"""Bytes (and elementwise FLOPs) of kernel tags on cases computed by hand.

Bytes of a kernel = bytes it reads from memory + bytes it writes to memory; a fused intermediate
that never leaves the kernel counts nothing.
"""

from __future__ import annotations

import torch
from conftest import run_compiled

from inductor_perf.model.tags import evaluate

N = 2**20  # elements
FP32 = 4


def _single_graph(fn, *inputs):
    run = run_compiled(fn, inputs, "inductor_perf", backward=False)
    assert len(run.graphs) == 1
    g = run.graphs[0]
    assert g.tagged, g.error
    return run, g.kernels


def _rw(k) -> tuple[int, int]:
    return evaluate(k.bytes_read), evaluate(k.bytes_written)


def test_sin_one_kernel() -> None:
    def f(x):  # a local function: compiling builtins directly shares one wrapper code object
        return torch.sin(x)  # across tests, and Dynamo's automatic dynamic shapes kick in

    run, kernels = _single_graph(f, torch.randn(N))
    assert len(kernels) == 1
    k = kernels[0]
    assert k.kind == "generated" and k.device == "cpu"
    # read x, write y: 2 · 2^20 · 4 B
    assert _rw(k) == (N * FP32, N * FP32)
    assert sum(_rw(k)) == 8_388_608
    assert evaluate(k.flops) == N and evaluate(k.matmul_flops) == 0


def test_mul_add_one_kernel() -> None:
    def f(a, b, c):
        return a * b + c

    run, kernels = _single_graph(f, torch.randn(N), torch.randn(N), torch.randn(N))
    assert len(kernels) == 1
    # three inputs read, one output written: 4 · 2^20 · 4 B
    assert _rw(kernels[0]) == (3 * N * FP32, N * FP32)
    assert sum(_rw(kernels[0])) == 16_777_216
    assert evaluate(kernels[0].flops) == 2 * N  # one mul + one add per element


def test_fused_chain_keeps_intermediate_inside() -> None:
    def f(x):
        return (x.sin() * 2).cos()

    run, kernels = _single_graph(f, torch.randn(N))
    assert len(kernels) == 1
    assert sum(_rw(kernels[0])) == 8_388_608  # not 3× that: the two intermediates stay in registers
    assert evaluate(kernels[0].flops) == 3 * N


def test_reduction_bytes() -> None:
    def f(x):
        return x.sum(dim=1)

    run, kernels = _single_graph(f, torch.randn(1024, 256))
    assert len(kernels) == 1
    # read 1024·256·4 = 1,048,576; write 1024·4 = 4,096
    assert _rw(kernels[0]) == (1_048_576, 4_096)
    assert evaluate(kernels[0].flops) == 1024 * 256  # 1 FLOP per input element


def test_extern_mm_bytes_and_flops() -> None:
    a, b = torch.randn(256, 512), torch.randn(512, 768)

    def f(a, b):
        return torch.mm(a, b)

    run, kernels = _single_graph(f, a, b)
    ext = [k for k in kernels if k.kind == "extern"]
    assert len(ext) == 1 and len(kernels) == 1
    k = ext[0]
    assert k.op is not None and k.op.startswith("aten.mm")
    # inputs 256·512 + 512·768 floats, output 256·768 floats
    assert _rw(k) == ((256 * 512 + 512 * 768) * FP32, 256 * 768 * FP32) == (2_097_152, 786_432)
    assert evaluate(k.matmul_flops) == 201_326_592  # INTEROP.md reference, = 2·256·512·768


def _externs(kernels) -> list[tuple[str | None, int, int]]:
    return [(k.op, *_rw(k)) for k in kernels if k.kind == "extern"]


def test_scatter_reduce_extern_reads_index_and_source_writes_what_it_scatters() -> None:
    """ScatterFallback: Inductor calls the in-place scatter_reduce_ on a buffer the graph has as the
    functional scatter_reduce (the tag once fell back to the IR node's size: written 0)."""
    def f(x, idx):
        return x.new_zeros(4, 16).scatter_reduce(0, idx, x * 2, reduce="amax", include_self=False)

    run, kernels = _single_graph(f, torch.randn(8, 16), torch.randint(0, 4, (8, 16)))
    # read index 8·16·8 = 1024 + source 8·16·4 = 512 + the 128 floats it updates (amax accumulates)
    # 512; write 128·4 = 512
    assert _externs(kernels) == [("aten.scatter_reduce_.two", 2048, 512)]
    ext = next(k for k in kernels if k.kind == "extern")
    assert [n.target for n in ext.nodes] == ["aten.scatter_reduce.two"]  # the op, not its neighbours


def test_index_put_accumulate_extern() -> None:
    """IndexPutFallback (int64 values: no atomic add); the tag once read all of self and every input
    and wrote all of self."""
    def f(x, idx):
        return x.new_zeros(4, 16).index_put((idx,), x * 2, accumulate=True)

    x, idx = torch.randint(0, 9, (8, 16)), torch.randint(0, 4, (8,))
    run, kernels = _single_graph(f, x, idx)
    from torch._inductor.utils import run_and_get_code

    torch._dynamo.reset()
    _, code = run_and_get_code(torch.compile(f), x, idx)  # plain Inductor's own code says which form
    if any("aten.index_put_" in c for c in code):  # up to torch 2.14: no atomic int64 add on the CPU
        # read indices 8·8 = 64 + values 8·16·8 = 1024 + the 128 int64 it adds to 1024; write 128·8
        assert _externs(kernels) == [("aten.index_put_.default", 2112, 1024)]
    else:  # torch 2.15 generates it, fused with the zeros and x*2: the result is never read back
        # read indices 64 + x 1024; write the 4·16 int64 result 512
        assert _externs(kernels) == []
        assert [(evaluate(k.bytes_read), evaluate(k.bytes_written)) for k in kernels] == [(1088, 512)]


def test_int32_sum_reads_int32_writes_int64() -> None:
    """torch.sum of int32 gives int64. Inductor's C++ kernel takes ``const int32_t*`` and converts in
    registers (``at::vec::convert<int64_t,2,int32_t,1>``, TORCH_LOGS=output_code, torch 2.13): it
    reads 4 B per element, unlike eager, whose reduction reads an int64 copy (docs/costs.md)."""
    def f(x):
        return x.sum(dim=1)

    run, kernels = _single_graph(f, torch.randint(0, 10, (1024, 256), dtype=torch.int32))
    assert run.output.dtype == torch.int64 and len(kernels) == 1
    # read 1024·256·4 = 1,048,576; write 1024·8 = 8,192
    assert _rw(kernels[0]) == (1_048_576, 8_192)
    assert evaluate(kernels[0].flops) == 1024 * 256
