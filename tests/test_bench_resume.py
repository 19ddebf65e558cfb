"""Resume: the runner (a real subprocess) is killed halfway, then re-run; only missing trials run."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from bench_support import manifest_obj, read_log, setup_bench, write_manifest

ROOT = Path(__file__).resolve().parents[1]


def _cmd(b: dict, manifest: Path, seed: int = 3, dry: bool = False) -> list[str]:
    cmd = [sys.executable, "-m", "analysis_lib", "bench", "full", "--manifest", str(manifest), "--runs-per-condition", "2",
           "--phase-budget-usd", "100", "--seed", str(seed), "--output", str(b["tmp"] / ("plan.json" if dry else "full_run.json")),
           "--runs-dir", str(b["tmp"] / "runs"), "-q"]
    return cmd + (["--dry-run"] if dry else [])


def _start_and_stop(b: dict, manifest: Path, sig: int, after: int) -> tuple[int, int]:
    # Each agent sleeps long enough that the signal lands mid-run even on a loaded CI machine (with
    # 0.4 s, a test process starved for two seconds once saw the whole run finish before it signalled).
    env = {**os.environ, **b["env"], "FAKE_CLAUDE_SLEEP": "1.0"}
    proc = subprocess.Popen(_cmd(b, manifest), cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    journal = b["tmp"] / "runs" / ".bench" / "journal"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and len(list(journal.glob("*.json"))) < after:
        time.sleep(0.05)
    proc.send_signal(sig)
    proc.communicate(timeout=30)
    return proc.returncode, len(list(journal.glob("*.json")))


@pytest.mark.slow
@pytest.mark.parametrize("sig, code", [(signal.SIGKILL, -signal.SIGKILL), (signal.SIGTERM, 130)])
def test_killed_run_resumes_only_the_missing_trials(tmp_path, sig, code):
    b = setup_bench(tmp_path)
    manifest = write_manifest(b, manifest_obj(b, {"fix-a": "solved", "fix-b": "fail"}))
    rc, journaled = _start_and_stop(b, manifest, sig, after=3)
    assert rc == code
    assert 3 <= journaled < 8
    plan = json.loads((tmp_path / "runs" / ".bench" / "plan.json").read_text())
    finished_before = {k.stem for k in (tmp_path / "runs" / ".bench" / "journal").glob("*.json")}
    log_before = read_log(tmp_path / "claude.log")
    # at most one trial was cut short mid-agent; nothing else ran
    assert journaled <= len(log_before) <= journaled + 1
    if sig == signal.SIGTERM:
        partial = json.loads((tmp_path / "full_run.json").read_text())
        assert partial["status"] == "interrupted" and partial["summary"]["finished"] == journaled

    env = {**os.environ, **b["env"]}
    done = subprocess.run(_cmd(b, manifest), cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    res = json.loads((tmp_path / "full_run.json").read_text())
    assert res["status"] == "complete" and res["summary"]["finished"] == 8
    # the same schedule as planned before the first trial, and as a dry run with that seed
    assert res["schedule"] == plan["schedule"]
    subprocess.run(_cmd(b, manifest, dry=True), cwd=ROOT, env=env, check=True, capture_output=True, timeout=60)
    assert json.loads((tmp_path / "plan.json").read_text())["schedule"] == res["schedule"]
    # only the trials missing from the journal ran again, in schedule order
    rerun = read_log(tmp_path / "claude.log")[len(log_before):]
    missing = [t for t in res["trials"] if t["key"] not in finished_before]
    assert [(e["task"], e["condition"], int(e["run"])) for e in rerun] == [(t["task_id"], t["condition"], t["run"]) for t in missing]
    # every trial folder complete, no staging leftovers
    for t in res["trials"]:
        assert (tmp_path / "runs" / t["trial_dir"] / "result.json").is_file()
    assert not (tmp_path / "runs" / ".bench" / "staging").exists()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP])
def test_sigterm_stops_the_running_agent_and_its_process_group(tmp_path, sig):
    b = setup_bench(tmp_path)
    manifest = write_manifest(b, manifest_obj(b, {"fix-a": "solved"}))
    woke = tmp_path / "agent-woke"
    (tmp_path / "systmp").mkdir()
    (tmp_path / "user-claude").mkdir()
    (tmp_path / "user-claude" / ".credentials.json").write_text("{}")
    env = {**os.environ, **b["env"], "FAKE_CLAUDE_SLEEP": "60", "FAKE_CLAUDE_WOKE": str(woke),
           "TMPDIR": str(tmp_path / "systmp"), "CLAUDE_CONFIG_DIR": str(tmp_path / "user-claude")}
    proc = subprocess.Popen(_cmd(b, manifest), cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not read_log(tmp_path / "claude.log"):
        time.sleep(0.05)
    agent_pid = read_log(tmp_path / "claude.log")[0]["pid"]
    assert list((tmp_path / "systmp").rglob(".credentials.json"))  # the trial's copy of the login
    proc.send_signal(sig)
    _, err = proc.communicate(timeout=30)
    try:
        assert proc.returncode == 130, err
        assert not woke.exists()  # the 60 s agent was stopped, not waited for
        assert not _alive(agent_pid)
        res = json.loads((tmp_path / "full_run.json").read_text())
        assert res["status"] == "interrupted" and res["summary"]["finished"] == 0
        assert b"re-run the same command to resume" in err
        # The trial's scratch folder (checkout, agent config, copied login) went with the stop.
        assert not list((tmp_path / "systmp").rglob(".credentials.json"))
    finally:
        if _alive(agent_pid):
            os.kill(agent_pid, signal.SIGKILL)
