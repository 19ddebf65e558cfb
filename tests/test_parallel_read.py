"""The parallel read: parent and forked helpers share the work; a helper that dies costs time, not trials."""

from __future__ import annotations

import os
import sys

import pandas as pd
import pytest

from analysis_lib.ingest import load
from analysis_lib.layer1 import analyse

from builders import small_runs


@pytest.fixture
def runs(tmp_path):
    return small_runs(tmp_path / "runs", n_tasks=12)  # 24 trials: enough to go parallel


@pytest.mark.skipif(sys.platform == "win32", reason="forked helpers need fork")
def test_parallel_read_equals_serial_and_survives_a_dead_helper(runs, monkeypatch):
    serial = analyse(runs, workers=1, cache=False).metrics
    pd.testing.assert_frame_equal(analyse(runs, workers=3, cache=False).metrics, serial)

    parent = os.getpid()
    real = load.rows_for_source

    def dies_in_a_helper(src, config=load.MetricsConfig()):
        if os.getpid() != parent:
            os._exit(3)  # a crash no exception handler sees (segfault, OOM kill)
        return real(src, config)

    monkeypatch.setattr(load, "rows_for_source", dies_in_a_helper)
    pd.testing.assert_frame_equal(analyse(runs, workers=2, cache=False).metrics, serial)
