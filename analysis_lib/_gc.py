"""Pausing Python's cyclic garbage collector around bulk work.

Building thousands of small objects (scan records, metric rows) triggers collections that walk
the whole heap, which holds pandas and Arrow: several milliseconds each, for nothing, since that
work makes no reference cycles worth collecting early. Objects freed by reference counting are
freed as usual while the collector is paused.
"""

from __future__ import annotations

import gc
from contextlib import contextmanager
from typing import Iterator


@contextmanager
def paused() -> Iterator[None]:
    """Disable the cyclic collector inside the block (re-entrant: restores the previous state)."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()
