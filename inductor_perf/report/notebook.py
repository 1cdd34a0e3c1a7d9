"""A trace's summary as one object for a notebook or a script: :func:`summarize` reads a trace file as
``inductor-perf summary`` does (the same functions: :func:`inductor_perf.summary.files.summarize_path`,
then the findings attached by :func:`inductor_perf.advice.advise.attach`), and the
:class:`TraceSummary` it returns shows as the report page in a notebook cell, prints as the text
summary and gives ``summary.json`` as a dict.

Example (a trace path from the command line)::

    import sys
    import inductor_perf
    s = inductor_perf.summarize(sys.argv[1])
    print(s)                     # the text summary
    s.to_dict()["busy_pct"]      # what summary --format json writes
"""

from __future__ import annotations

import os
from typing import Any

from .html import notebook_html, render_report
from .text import format_summary


class TraceSummary:
    """One trace's summary, with its findings (:attr:`summary`: the
    :class:`~inductor_perf.summary.rows.Summary`), and the device its roofs came from
    (:attr:`device`; None when unknown)."""

    def __init__(self, summary: Any, device: Any = None, path: str | None = None) -> None:
        self.summary = summary
        self.device = device
        self.path = path

    def text(self, fmt: str = "text") -> str:
        """The summary as ``inductor-perf summary --format FMT`` prints it (text, markdown or json)."""
        return format_summary(self.summary, fmt)

    def __str__(self) -> str:
        return self.text()

    def __repr__(self) -> str:
        return f"<TraceSummary {self.summary.label or self.path or 'trace'}: {len(self.summary.findings)} finding(s)>"

    def to_dict(self) -> dict[str, Any]:
        """``summary --format json`` of the same trace, as a dict (strict JSON values)."""
        return self.summary.to_dict()

    def html(self) -> str:
        """The report page (``inductor-perf report``'s, findings first) of this summary."""
        return render_report(None, device=self.device, summary=self.summary, title=self.summary.label or "trace")

    def _repr_html_(self) -> str:
        """The page in an iframe, as a capture's result shows (:func:`~inductor_perf.report.html.notebook_html`)."""
        return notebook_html(self.summary, self.device)


def summarize(path: str | os.PathLike, *, device: Any = None, engine: str = "auto") -> TraceSummary:
    """The :class:`TraceSummary` of the one trace file at ``path`` (raw or augmented, local or a URL
    the CLI takes), with its findings: what ``inductor-perf summary PATH --engine ENGINE`` shows.
    ``device``: a :class:`~inductor_perf.devices.spec.DeviceSpec` whose peaks to use (default: the
    trace's own GPU). A path holding several traces is an error (one line): their cross-rank view is
    :func:`inductor_perf.ranks_view`."""
    from ..advice.advise import attach
    from ..errors import InductorPerfError
    from ..summary.files import summarize_path, trace_files

    where = os.fspath(path)
    files = trace_files(where)
    if len(files) > 1:
        raise InductorPerfError(f"{where}: holds {len(files)} traces; expected one trace file "
                                "(inductor_perf.ranks_view gives the view of several)")
    ct = next(iter(summarize_path(where, device=device, engine=engine)))
    return TraceSummary(attach(ct.summary), ct.device, where)
