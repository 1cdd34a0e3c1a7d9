"""The contract between the joins and augmentation: what one event cost (``EventCost``; a collective's
message, ``CommCost``) and the counts each stage reports (``JoinStats``, ``AugmentStats``). A leaf: it
imports nothing of ours."""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pragma: no cover
    import torch

    from .tags import KernelTag

COST_SOURCES = ("tag", "shapes", "triton")

BUS_FACTORS = {
    "all_reduce": lambda n: 2 * (n - 1) / n,
    "all_gather": lambda n: (n - 1) / n,
    "reduce_scatter": lambda n: (n - 1) / n,
    "all_to_all": lambda n: (n - 1) / n,
    "broadcast": lambda n: 1.0,
    "reduce": lambda n: 1.0,
    "send": lambda n: 1.0,
    "recv": lambda n: 1.0,
    "send_recv": lambda n: 1.0,
}
"""busbw / algbw per collective for n ranks (nccl-tests' PERFORMANCE.md, "Summary")."""


@dataclass(frozen=True)
class CommCost:
    """A collective kernel's message: the collective, S in bytes, the group size and where the
    size came from ("kernel", "record_param_comms", "nccl_annotation") and the group size
    ("args", "pg_config", "world_size")."""

    op: str
    nbytes: int
    group_size: int | None
    size_source: str
    group_source: str | None = None

    @property
    def bus_factor(self) -> float | None:
        """busbw / algbw (None: unknown collective or group size)."""
        f = BUS_FACTORS.get(self.op)
        n = self.group_size
        return f(n) if f is not None and n is not None and n >= 1 else None


@dataclass(frozen=True)
class EventCost:
    """What one kernel event computed, and where it came from."""

    flops: int
    matmul_flops: int
    bytes_read: int
    bytes_written: int
    dtype: "torch.dtype | str | None" = None
    """Picks the peak: the matmul roof when ``matmul_flops > 0``, else the vector roof. A torch.dtype
    (capture) or its name as torch spells it ("bfloat16"; offline attribution, which stays torch-free)."""
    source: str | None = None
    module_path: str | None = None
    node_names: tuple[str, ...] = ()
    stack_trace: str | None = None
    kind: str | None = None
    """"generated" | "extern"."""
    graph_id: int | None = None
    is_backward: bool | None = None
    eager_ops: tuple[str, ...] = ()
    """Eager ops fused into the kernel (``aten::add``, ...), from the tags' FX nodes."""
    tag: "KernelTag | None" = field(default=None, compare=False, repr=False)
    """The compile-time tag this cost was evaluated from (cost_source "tag"), so consumers such as
    compare read its nodes and modules without joining events to tags again."""
    cost_source: str = "shapes"
    """"tag" | "shapes" | "triton". For "triton" only the total bytes are known (kept in
    ``bytes_read``), so the read/written split is not written to the trace."""
    recompute_flops: int = 0
    """Of ``matmul_flops``, recomputed forward work (a tag's ``recompute_flops``; 0 for other costs)."""
    memory_roof: str | None = None
    """The roof ``achieved_bandwidth_pct`` is measured against when it is not the device memory:
    "host_link" (HtoD / DtoH copies), "interconnect" (peer copies, collectives); "hbm" for the
    copies and memsets that go through device memory. None: HBM, not written (every kernel)."""
    comm: CommCost | None = None
    """A collective kernel's message (:mod:`inductor_perf.costs.comm`): the event then gets the
    collective's args instead of FLOPs and bytes."""
    bound: str | None = None
    """"lower": FLOPs and bytes are a lower bound (an op whose record left out values that change its
    cost; docs/costs.md), written as ``kernel_cost_bound``. None: the cost itself."""


@dataclass
class AugmentStats:
    """Counts of what augmentation did and what it had to skip; the CLI prints the non-zero ones."""

    events: int = 0
    events_augmented: int = 0
    events_labelled: int = 0
    """Device events that got only ``launch_op`` / ``not_costed`` (no cost)."""
    cpu_ops: int = 0
    device_kernels: int = 0
    ops_costed: int = 0
    """CPU ops whose FLOPs/bytes came from recorded shapes (or launch args)."""
    ops_without_shapes: int = 0
    """Ops with a known formula but no usable ``Input Dims`` / ``Concrete Inputs``."""
    ops_bad_shapes: int = 0
    """Ops whose recorded shapes do not fit the op (wrong rank, mismatched dims)."""
    unknown_dtypes: int = 0
    unknown_dtype_names: tuple[str, ...] = ()
    kernels_without_launch: int = 0
    """Device kernels whose launching CPU op could not be found."""
    duplicate_external_ids: int = 0
    ops_with_several_kernels: int = 0
    """Costed ops that launched more than one kernel: the cost is split over them by duration
    (docs/costs.md, "One op, several kernels")."""
    triton_costed: int = 0
    tbe_backwards_paired: int = 0
    """Backward embedding-bag (fbgemm TBE) nodes costed from their forward's shapes."""
    ops_lower_bound: int = 0
    """Costed ops whose cost is a lower bound (``kernel_cost_bound: "lower"``)."""
    copies_costed: int = 0
    """memcpy / memset events sized from their own ``bytes`` (or the runtime call's ``size``)."""
    copies_unsized: int = 0
    """memcpy / memset events with no size: no cost."""
    collectives_sized: int = 0
    """Collective kernels whose message size was found (:mod:`inductor_perf.costs.comm`)."""
    collectives_unsized: int = 0
    """Collective kernels with no recorded message size: no bandwidth."""
    nonpositive_dur: int = 0
    """Costed events with dur 0: no achieved throughput for them."""
    bad_time: int = 0
    """Complete events skipped for their ts/dur (``model.events.event_time``): not costed, not augmented."""
    non_finite_inputs: int = 0
    """NaN / Infinity values in the input file, written as null."""
    device_name: str | None = None
    peaks_known: bool = False
    notes: list[str] = field(default_factory=list)
    worker_maxrss_kb: int | None = field(default=None, compare=False)
    """Peak RSS (KB, from ``wait4``) of the worker the stream engine forked and reaped; None when it
    forked none. A forked worker's RSS also counts the pages it still shares with its parent, so the
    parent's peak plus this is an upper bound on what the two used together. Not compared: it says
    how the run went, not what it wrote."""
    stage_marks: tuple[tuple[str, float, str], ...] = field(default=(), compare=False)
    """The stream engine's stages: ``(process, seconds, stage)``, process "main" or "worker", seconds
    since the engine began (one clock for both processes). Each process's marks in the order it
    reached them; the worker's are added when its part comes back. Empty for the full engine. Not
    compared."""

    def add_attribution(self, attribution: "AugmentStats", note: str | None = None,
                        non_finite: int = 0) -> "AugmentStats":
        """Fold the attribution's counts into these augmentation counts (the event count is the
        attribution's: it saw every event), add the input's NaN/Infinity count and ``note`` (kept
        only when an event was augmented); returns self."""
        self.merge_from(attribution)
        self.events = attribution.events
        self.non_finite_inputs += non_finite
        if note and self.events_augmented:
            self.notes.append(note)
        return self

    def merge_from(self, other: "AugmentStats") -> None:
        """Add ``other``'s counts to this one (names and notes are combined)."""
        for f in _COUNT_FIELDS:
            setattr(self, f, getattr(self, f) + getattr(other, f))
        self.unknown_dtype_names = tuple(sorted(set(self.unknown_dtype_names) | set(other.unknown_dtype_names)))
        self.notes.extend(n for n in other.notes if n not in self.notes)

    def warnings(self) -> list[str]:
        """One short line per non-zero problem count."""
        out = []
        if self.events == 0:
            out.append("the trace has no events")
        if self.non_finite_inputs:
            out.append(f"{self.non_finite_inputs} NaN/Infinity values written as null")
        if self.ops_without_shapes:
            out.append(f"{self.ops_without_shapes} ops without recorded shapes "
                       "(profile with record_shapes=True)")
        if self.ops_bad_shapes:
            out.append(f"{self.ops_bad_shapes} ops with shapes that do not fit the op")
        if self.ops_lower_bound:
            out.append(f"{self.ops_lower_bound} ops costed as a lower bound (kernel_cost_bound: lower; their "
                       "records leave out values that change the cost)")
        if self.unknown_dtypes:
            names = ", ".join(self.unknown_dtype_names[:5])
            out.append(f"{self.unknown_dtypes} ops with unknown dtypes ({names})")
        if self.kernels_without_launch:
            out.append(f"{self.kernels_without_launch} device kernels without a launching op")
        if self.collectives_unsized:
            out.append(f"{self.collectives_unsized} collective kernels without a recorded message size")
        if self.duplicate_external_ids:
            out.append(f"{self.duplicate_external_ids} duplicate External ids")
        if self.nonpositive_dur:
            out.append(f"{self.nonpositive_dur} costed events with dur <= 0 (no achieved rate)")
        out.extend(self.notes)
        return out

    def summary_line(self) -> str:
        """``"12 of 3400 events augmented; warnings: ..."`` for the CLI's one line."""
        s = f"{self.events_augmented} of {self.events} events augmented"
        w = self.warnings()
        return s + ("; " + "; ".join(w) if w else "")


_COUNT_FIELDS = tuple(f.name for f in fields(AugmentStats) if f.type == "int")
"""The counts :meth:`AugmentStats.merge_from` adds up: every plain ``int`` field (the worker's RSS is
``int | None``, a measurement, not a count)."""


@dataclass
class JoinStats:
    """What the join found; ``unmatched_*`` are worth a warning."""

    markers: int = 0
    markers_unknown_graph: int = 0
    """Markers whose graph instance this process does not know (another process's trace)."""
    untagged_graphs: int = 0
    events_tagged: int = 0
    device_events_tagged: int = 0
    unmatched_call_sites: int = 0
    """Call sites with no event (e.g. C++ kernels compiled without kernel profiling)."""
    symbolic_unresolved: int = 0
    graph_replay_kernels: int = 0
    """Device kernels tagged by their position in a CUDA graph replay (mode="reduce-overhead")."""
    per_marker_counts: list[tuple[int, int]] = field(default_factory=list)

    def warnings(self) -> list[str]:
        out = []
        if self.markers_unknown_graph:
            out.append(f"{self.markers_unknown_graph} graph call(s) from graphs this process did not compile")
        if self.untagged_graphs:
            out.append(f"{self.untagged_graphs} graph call(s) of untagged graphs (tagging failed)")
        if self.unmatched_call_sites:
            out.append(f"{self.unmatched_call_sites} kernel call site(s) had no event in the trace")
        if self.symbolic_unresolved:
            out.append(f"{self.symbolic_unresolved} kernel(s) with sizes the trace did not record")
        return out
