"""Processes that end with the run that started them, however it ends (SIGKILL included)."""

from __future__ import annotations

import ctypes
import os
import signal

PR_SET_PDEATHSIG = 1


def end_with_parent(sig: int = signal.SIGTERM, parent: int | None = None) -> None:
    """In a child process: receive ``sig`` when the process that started it dies (Linux only; elsewhere nothing).
    ``parent``: its pid, where the parent may already be gone by the time this runs (then the child ends now)."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, sig)
    except (OSError, AttributeError):
        return
    if parent is not None and os.getppid() != parent:  # the parent died before prctl: no signal will come
        os.kill(os.getpid(), sig)
