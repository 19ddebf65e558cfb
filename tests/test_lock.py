"""``core.lock.folder_lock``: one holder per folder, named when busy, taken over when its holder died.

The holders are real processes: the kernel's flock is what tells a live holder from a dead one.
"""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import sys
import textwrap
from pathlib import Path

import psutil
import pytest

from analysis_lib.core.lock import FolderBusy, folder_lock, holder_path

ROOT = Path(__file__).resolve().parents[1]

HOLD = textwrap.dedent("""
    import sys, time
    from analysis_lib.core.lock import folder_lock
    with folder_lock(sys.argv[1], what="output folder", command="analysis"):
        print("held", flush=True)
        time.sleep(120)
""")


def _holder(folder: Path) -> subprocess.Popen:
    """A process holding ``folder``'s lock (it prints ``held`` once it does)."""
    proc = subprocess.Popen([sys.executable, "-c", HOLD, str(folder)], cwd=ROOT, stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None and proc.stdout.readline().strip() == "held"
    return proc


def test_a_second_holder_is_refused_in_one_line_naming_the_folder_and_the_holder(tmp_path):
    folder = tmp_path / "out"
    proc = _holder(folder)
    try:
        with pytest.raises(FolderBusy) as busy, folder_lock(folder, what="output folder"):
            pass
        msg = str(busy.value)
        assert "\n" not in msg
        assert msg.startswith(f"output folder {folder} is in use by pid {proc.pid} on {socket.gethostname()}, started 20")
        assert "(analysis)" in msg
    finally:
        proc.kill()
        proc.wait()


def test_the_lock_of_a_holder_killed_by_sigkill_is_taken_over_with_a_warning(tmp_path):
    folder = tmp_path / "out"
    proc = _holder(folder)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    left = json.loads(holder_path(folder / ".lock").read_text())
    assert left["pid"] == proc.pid  # nothing could remove it
    warnings: list[str] = []
    with folder_lock(folder, what="output folder", warn=warnings.append) as me:
        assert json.loads(holder_path(folder / ".lock").read_text())["pid"] == me.pid
    assert len(warnings) == 1
    assert warnings[0].startswith(f"warning: output folder {folder}: took over the lock left by pid {proc.pid} on ")
    # A clean release leaves no record behind: the next holder takes the lock without a warning.
    assert not holder_path(folder / ".lock").exists()
    with folder_lock(folder, what="output folder", warn=warnings.append):
        pass
    assert len(warnings) == 1


def test_a_process_the_holder_forked_does_not_keep_the_lock_after_the_holder_died(tmp_path):
    """The runner forks reader workers (sequential looks): after a kill -9 of the runner, a worker still alive
    must not keep the runs folder locked (filelock closes its descriptors in a forked child)."""
    folder = tmp_path / "out"
    script = textwrap.dedent("""
        import os, sys, time
        from analysis_lib.core.lock import folder_lock
        with folder_lock(sys.argv[1], what="runs folder"):
            ready_r, ready_w = os.pipe()
            if os.fork() == 0:
                os.write(ready_w, b"x")  # the child's after-fork hooks have run
                time.sleep(120)
                os._exit(0)
            os.read(ready_r, 1)
            print("held", flush=True)
            time.sleep(120)
    """)
    proc = subprocess.Popen([sys.executable, "-c", script, str(folder)], cwd=ROOT, stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None and proc.stdout.readline().strip() == "held"
    child = psutil.Process(proc.pid).children()[0]
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    try:
        assert child.is_running()
        warnings: list[str] = []
        with folder_lock(folder, what="runs folder", warn=warnings.append):
            pass
        assert len(warnings) == 1 and f"took over the lock left by pid {proc.pid} " in warnings[0]
    finally:
        child.kill()
