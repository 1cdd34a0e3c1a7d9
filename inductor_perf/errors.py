"""The exceptions users see. Each message says what was expected."""

from __future__ import annotations


class InductorPerfError(Exception):
    """Base class of every error inductor_perf raises on purpose."""


class OptionsError(InductorPerfError, ValueError):
    """An unknown or ill-typed key in ``torch.compile(..., options=...)``."""


class UnsupportedTorchError(InductorPerfError, RuntimeError):
    """The installed torch is older than the oldest release we support (inductor_perf.compat.MIN_TORCH)."""


class TraceFormatError(InductorPerfError, ValueError):
    """A file that is not a readable Kineto / Chrome trace."""


class DeviceSpecError(InductorPerfError, ValueError):
    """A device row (user override file or ``options=``) that does not validate."""


class OutputError(InductorPerfError, OSError):
    """A file we were asked to write that must not or cannot be written: one of the inputs, a
    directory or device, a missing folder, a full disk. An OSError too, for callers that treat any
    failed write alike."""
