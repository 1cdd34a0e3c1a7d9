"""Eager vs compiled (and trace vs trace), matched by what the user wrote: nn.Module path, source line
or eager op, never by kernel name (except ``by="kernel"``, for two compiled runs of the same code).

Upstream's trace diff joins by kernel name, which cannot work between eager (aten ops) and compiled
(fused kernels). Here each trace is cut into *units*: the outermost op or kernel events of each thread
(an ``aten::linear`` counts once, not again for the ``aten::addmm`` inside it; a compiled graph's
kernels count one by one). Each unit gets

- a phase: forward or backward (compiled kernels: their graph; eager autograd ops: the
  ``autograd::engine::evaluate_function`` events of the backward pass, and every op of the autograd
  engine's own thread, where torch runs the backward beside a device), or optimizer: whatever runs
  inside torch.optim's ``Optimizer.step#`` / ``Optimizer.zero_grad#`` ranges;
- a module: the innermost ``## inductor_perf module=<fqn> ##`` range around an eager op
  (:mod:`inductor_perf.comparison.eager`); for an eager backward op, the module of the forward op with the same
  autograd ``Sequence number`` (on whichever thread it ran); for a compiled kernel, its ``module_path``
  arg (augmented traces: on the host event, or on the device events it launched);
- a source line (compiled kernels only: eager traces carry none);
- the eager ops it stands for: its own name for eager units; for compiled kernels, the
  ``original_aten`` ops of the FX nodes it computes (``eager_ops`` arg).

Rows group units by key within each phase and join the two traces on (phase, key). Module rows are
leaf-level: each unit counts in exactly one row (its innermost module), and a parent row holds only
the work done directly in the parent's own ``forward``. A compiled kernel that fuses nodes of several
modules counts in the module its tag names (``KernelTag.module_path``, decided once in tagging: the
module whose nodes do most of the kernel's work); the fusion map names the others.

A unit's time is its host time on its thread; its FLOPs and peak share are those of the costed events
inside it (CPU) or of the device events it launched (GPU). ``by="kernel"`` rows are the trace's
kernels as the summary counts them instead (:mod:`.kernels`): device events, with their device time,
or the CPU kernels. Time per row is per step (mean over the recorded steps), cut to the steps. The
totals row is the measured step time (from the step ranges); whatever no row covers (Python between
ops, hooks, the profiler itself; device idle) is the "(unattributed)" row, so the rows, less the time
rows of two threads or streams ran at once, plus "(unattributed)" add up to the measured step time
exactly, and "(unattributed)" is never negative.

Stages: ``units`` (a trace cut into units), ``kernels`` (kernels, whose they are, the time units
cover), ``rows`` (two traces' units joined into rows; the fusion map), ``sides`` (a file reduced to
aggregated units, streamed when large), ``runner`` (running the model, the entry points: ``compare``,
``compare_file``, ``diff_files``, ``diff_traces``), ``eager`` (the module, phase and step ranges of eager runs). Text, markdown and
JSON rendering is in :mod:`inductor_perf.report.text`.
"""
