"""The parallel read: a process pool gives the serial table; a worker that dies costs time, not trials."""

from __future__ import annotations

import os
import sys

import pandas as pd
import pytest
from builders import small_runs

from analysis_lib.metrics import trials_table
from analysis_lib.study.layer1 import analyse


@pytest.fixture
def runs(tmp_path):
    return small_runs(tmp_path / "runs", n_tasks=12)  # 24 trials: enough to go parallel


@pytest.mark.skipif(sys.platform == "win32", reason="the dying worker is set up by fork")
def test_parallel_read_equals_serial_and_survives_a_dead_worker(runs, monkeypatch, capsys):
    serial = analyse(runs, workers=1, cache=False).metrics
    pd.testing.assert_frame_equal(analyse(runs, workers=3, cache=False).metrics, serial)

    parent = os.getpid()
    real = trials_table.trial_row

    def dies_in_a_worker(trial, config=trials_table.DEFAULT_CONFIG):
        if os.getpid() != parent:
            os._exit(3)  # a crash no exception handler sees (segfault, OOM kill)
        return real(trial, config)

    monkeypatch.setattr(trials_table, "trial_row", dies_in_a_worker)
    pd.testing.assert_frame_equal(analyse(runs, workers=2, cache=False).metrics, serial)
    assert "a worker process died" in capsys.readouterr().err


def test_workers_return_rows_not_trajectories(runs):
    """What crosses from a worker to this process is a source's rows and errors: small, plain values."""
    from analysis_lib.ingest.discover import discover

    src = discover(runs)[0][0]
    rows, errors = trials_table.source_rows(src)
    assert errors == [] and len(rows) == 1
    assert all(v is None or isinstance(v, (str, int, float, bool)) for v in rows[0].values())


READ_SLOWLY = """
import os, sys, time
from analysis_lib.metrics import trials_table

def slow(src, config=trials_table.DEFAULT_CONFIG):
    open(os.path.join(sys.argv[2], str(os.getpid())), "w").close()
    time.sleep(120)  # a read that takes minutes (a huge trajectory, a slow network disk)

trials_table.source_rows = slow
trials_table.trials_table(sys.argv[1], workers=2)
"""


@pytest.mark.skipif(sys.platform != "linux", reason="the dying worker is set up by fork")
def test_reader_workers_die_with_a_killed_analysis(runs, tmp_path):
    """kill -9 of the analysis mid-read: its two reader workers end with it instead of reading on for minutes."""
    import signal
    import subprocess
    import time

    import psutil

    started = tmp_path / "workers"
    started.mkdir()
    proc = subprocess.Popen([sys.executable, "-c", READ_SLOWLY, str(runs), str(started)])
    workers: list[int] = []
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and len(list(started.iterdir())) < 2:
            time.sleep(0.05)
        workers = [int(p.name) for p in started.iterdir()]
        assert len(workers) == 2
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and any(psutil.pid_exists(w) and psutil.Process(w).status() != psutil.STATUS_ZOMBIE
                                                  for w in workers):
            time.sleep(0.05)
        left = [w for w in workers if psutil.pid_exists(w) and psutil.Process(w).status() != psutil.STATUS_ZOMBIE]
        assert left == []
    finally:
        proc.kill()
        for w in workers:
            if psutil.pid_exists(w):
                os.kill(w, signal.SIGKILL)
