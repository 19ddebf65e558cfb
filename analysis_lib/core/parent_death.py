"""A child process that dies with its parent (Linux ``PR_SET_PDEATHSIG``), even when the parent is killed by SIGKILL.

Used by the analysis' reader workers (a killed analysis must not leave two busy 100 MB workers
behind) and by the runner's agents. The signal fires when the *thread* that forked the child ends;
both callers fork from the thread that waits for the children. Elsewhere than Linux it does nothing.
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys

PR_SET_PDEATHSIG = 1


def die_with_parent(signum: int = signal.SIGKILL, parent_pid: int | None = None) -> None:
    """In a child process: get ``signum`` when the parent dies; exit at once if ``parent_pid`` already died."""
    if not sys.platform.startswith("linux"):
        return
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, int(signum), 0, 0, 0)
    except (OSError, AttributeError):
        return
    # The parent may have died before the call above: then nothing will ever send the signal.
    if parent_pid is not None and os.getppid() != parent_pid:
        os._exit(1)
