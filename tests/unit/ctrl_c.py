"""A real Ctrl-C for the tests that need one: SIGINT to this process after a delay."""

from __future__ import annotations

import contextlib
import os
import signal
import threading
from collections.abc import Iterator


@contextlib.contextmanager
def ctrl_c_after(seconds: float) -> Iterator[None]:
    """SIGINT to this process ``seconds`` into the block, with Python's own SIGINT handler installed
    for the block's time, as in a terminal. A shell starts a background job (``make test &``,
    ``nohup``) with SIGINT ignored, and Python then keeps it ignored: no KeyboardInterrupt would come."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    timer = threading.Timer(seconds, os.kill, (os.getpid(), signal.SIGINT))
    timer.start()
    try:
        yield
    finally:
        timer.cancel()
        signal.signal(signal.SIGINT, previous)
