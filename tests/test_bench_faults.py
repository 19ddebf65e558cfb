"""The runner under faults, with real subprocesses: two runners on one runs folder, a killed runner's lock,
agents that leave processes behind, kill -9 mid-trial (and the copied login), a full disk, a changed plan."""

from __future__ import annotations

import json
import os
import shutil
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest
from bench_support import manifest_obj, read_log, setup_bench, use_bench, write_manifest
from ci_rule import skip_or_fail_in_ci

from analysis_lib.bench.runner import run_full
from analysis_lib.bench.scratch import scratch_root
from analysis_lib.core.lock import BUSY_EXIT_CODE

ROOT = Path(__file__).resolve().parents[1]


def _cmd(b: dict, manifest: Path, runs: Path, *extra: str, runs_per_condition: int = 2) -> list[str]:
    return [sys.executable, "-m", "analysis_lib", "bench", "full", "--manifest", str(manifest),
            "--runs-per-condition", str(runs_per_condition), "--phase-budget-usd", "100", "--seed", "5",
            "--output", str(b["tmp"] / "full_run.json"), "--runs-dir", str(runs), *extra]


def _env(b: dict, **extra: str) -> dict[str, str]:
    # TMPDIR: the trials' scratch folders (checkouts, copied logins) land in this test's own temp folder.
    tmpdir = b["tmp"] / "systmp"
    tmpdir.mkdir(exist_ok=True)
    return {**os.environ, **b["env"], "PYTHONPATH": str(ROOT), "TMPDIR": str(tmpdir), **extra}


def _wait_for(cond, timeout: float = 60.0, what: str = "condition") -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def _running(pid: int) -> bool:
    """Alive and not a zombie (a zombie has ended; only its exit status is left to collect)."""
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def _kill_if_running(*pids: int) -> None:
    for pid in pids:
        if _running(pid):
            os.kill(pid, signal.SIGKILL)


def _pid(path: Path) -> int:
    return int(path.read_text())


@pytest.mark.slow  # four scripted trials of 1 s each, run by a real runner subprocess
def test_a_second_runner_on_the_same_runs_folder_is_refused_and_the_first_finishes_whole(tmp_path):
    b = setup_bench(tmp_path)
    manifest = write_manifest(b, manifest_obj(b, {"fix-a": "solved"}))
    runs = tmp_path / "runs"
    first = subprocess.Popen(_cmd(b, manifest, runs, "-q"), cwd=ROOT, env=_env(b, FAKE_CLAUDE_SLEEP="1.0"),
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        _wait_for(lambda: read_log(tmp_path / "claude.log"), what="the first runner's first agent")
        # A second terminal, a re-launched job: the same command on the same runs folder, while a trial runs.
        second = subprocess.run(_cmd(b, manifest, runs, "-q"), cwd=ROOT, env=_env(b), capture_output=True, text=True, timeout=120)
        assert second.returncode == BUSY_EXIT_CODE
        lines = second.stderr.strip().splitlines()
        assert len(lines) == 1, second.stderr
        assert lines[0].startswith(f"error: runs folder {runs} is in use by pid {first.pid} on ")
        assert ", started 20" in lines[0]
        _, err = first.communicate(timeout=120)
    finally:
        if first.poll() is None:
            first.kill()
    assert first.returncode == 0, err
    res = json.loads((runs / "full_run.json").read_text())
    assert res["status"] == "complete" and res["summary"]["finished"] == 4
    # Every trial of the first runner recorded with its tokens and cost, and each agent ran (and was paid) once.
    for t in res["trials"]:
        assert t["status"] == "completed" and t["cost_usd"] == pytest.approx(0.25)
        result = json.loads((runs / t["trial_dir"] / "result.json").read_text())
        assert result["agent_result"]["n_input_tokens"] > 0 and result["agent_result"]["cost_usd"] == pytest.approx(0.25)
    assert len(read_log(tmp_path / "claude.log")) == 4
    assert not (runs / ".bench" / "runner.lock.holder.json").exists()  # released on the way out


@pytest.mark.slow  # a runner killed mid-trial, then a resumed run (real subprocesses)
def test_kill_9_mid_trial_ends_the_agent_and_its_children_and_resume_removes_the_copied_login(tmp_path):
    b = setup_bench(tmp_path)
    manifest = write_manifest(b, manifest_obj(b, {"fix-a": "solved"}))
    runs = tmp_path / "runs"
    user_config = tmp_path / "user-claude"
    user_config.mkdir()
    (user_config / ".credentials.json").write_text('{"claudeAiOauth": {"accessToken": "sk-ant-oat-secret"}}')
    bg = tmp_path / "bg"
    env = _env(b, FAKE_CLAUDE_SLEEP="60", FAKE_CLAUDE_BACKGROUND=str(bg), FAKE_CLAUDE_WOKE=str(tmp_path / "agent-woke"),
               CLAUDE_CONFIG_DIR=str(user_config))
    runner = subprocess.Popen(_cmd(b, manifest, runs, "-q", runs_per_condition=1), cwd=ROOT, env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    pids: list[int] = []
    try:
        _wait_for(lambda: read_log(tmp_path / "claude.log"), what="the first agent")
        first = read_log(tmp_path / "claude.log")[0]
        stem = f"{bg}.{first['condition']}"
        _wait_for(lambda: Path(f"{stem}.child").exists() and Path(f"{stem}.daemon").exists(), what="the agent's children")
        pids = [first["pid"], _pid(Path(f"{stem}.child")), _pid(Path(f"{stem}.daemon"))]
        # The login was copied into the trial's private scratch folder, readable by this user only.
        copies = list((tmp_path / "systmp").rglob(".credentials.json"))
        assert len(copies) == 1
        assert stat.S_IMODE(copies[0].stat().st_mode) == 0o600
        for folder in list(copies[0].parents)[:4]:  # config folder, trial, runs folder's, user's scratch folder
            assert stat.S_IMODE(folder.stat().st_mode) & 0o077 == 0, folder
        runner.send_signal(signal.SIGKILL)
        runner.communicate(timeout=30)
        # The agent, its child in its process group and the daemon that left the group all end with the runner.
        _wait_for(lambda: not any(_running(p) for p in pids), timeout=30, what="the agent's processes to end")
    finally:
        if runner.poll() is None:
            runner.kill()
        _kill_if_running(*pids)
    assert copies[0].exists()  # kill -9 gives no chance to clean up: the resumed run must

    done = subprocess.run(_cmd(b, manifest, runs, runs_per_condition=1), cwd=ROOT,
                          env=_env(b, CLAUDE_CONFIG_DIR=str(user_config)), capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stderr
    assert "removed 1 trial scratch folder(s) (checkout, agent config, copied login) left by an earlier run" in done.stderr
    assert not list((tmp_path / "systmp").rglob(".credentials.json"))
    assert not scratch_root(runs).exists() or not any(scratch_root(runs).iterdir())
    assert json.loads((runs / "full_run.json").read_text())["summary"]["finished"] == 2
    assert not (tmp_path / "agent-woke").exists() and not Path(f"{stem}.child.woke").exists()


@pytest.mark.slow  # a runner killed by SIGKILL, then the same command again
def test_the_lock_of_a_killed_runner_is_taken_over_with_a_warning(tmp_path):
    b = setup_bench(tmp_path)
    manifest = write_manifest(b, manifest_obj(b, {"fix-a": "solved"}))
    runs = tmp_path / "runs"
    runner = subprocess.Popen(_cmd(b, manifest, runs, "-q", runs_per_condition=1), cwd=ROOT,
                              env=_env(b, FAKE_CLAUDE_SLEEP="60"), stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        _wait_for(lambda: read_log(tmp_path / "claude.log"), what="the first agent")
        dead = runner.pid
        runner.send_signal(signal.SIGKILL)
        runner.communicate(timeout=30)
    finally:
        if runner.poll() is None:
            runner.kill()
    holder = json.loads((runs / ".bench" / "runner.lock.holder.json").read_text())
    assert holder["pid"] == dead  # the record of the dead holder is still there
    done = subprocess.run(_cmd(b, manifest, runs, "-q", runs_per_condition=1), cwd=ROOT, env=_env(b),
                          capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stderr
    assert f"warning: runs folder {runs}: took over the lock left by pid {dead} on " in done.stderr
    assert json.loads((runs / "full_run.json").read_text())["status"] == "complete"


def test_processes_an_agent_leaves_behind_end_with_its_trial(tmp_path, monkeypatch):
    b = setup_bench(tmp_path)
    use_bench(b, monkeypatch)
    bg = tmp_path / "bg"
    monkeypatch.setenv("FAKE_CLAUDE_BACKGROUND", str(bg))
    obj = manifest_obj(b, {"fix-a": "solved"})
    res = run_full(write_manifest(b, obj), 1, 1, 100.0, output=None, runs_dir=tmp_path / "runs", quiet=True)
    assert res["status"] == "complete"
    pids = {p.name: _pid(p) for p in tmp_path.glob("bg.*.*") if p.suffix in (".child", ".daemon")}
    assert sorted(pids) == ["bg.codegraph.child", "bg.codegraph.daemon", "bg.text.child", "bg.text.daemon"]
    try:
        # Both conditions' leftovers, the daemon that left the agent's process group included, are gone once the
        # run returns: the second trial of the pair never ran beside the first one's leftovers.
        assert [name for name, pid in pids.items() if _running(pid)] == []
    finally:
        _kill_if_running(*pids.values())
    for t in res["trials"]:
        assert t["status"] == "completed" and t["outcome"] == "passed"
        assert any("the agent left 2 process(es) running when it exited; they were stopped" in w for w in t["warnings"]), t["warnings"]
    assert not list(tmp_path.glob("bg.*.woke"))


def _unshare_works() -> bool:
    if shutil.which("unshare") is None:
        return False
    probe = subprocess.run(["unshare", "-rm", "sh", "-c", "mount -t tmpfs -o size=64k tmpfs /mnt"], capture_output=True, timeout=30)
    return probe.returncode == 0


@pytest.mark.slow  # two runner subprocesses inside a private mount namespace
def test_a_full_disk_under_the_runs_folder_ends_in_one_line_and_the_run_is_recorded_as_failed(tmp_path):
    """A real full disk: the runs folder is a 1 MB tmpfs mounted in a private user and mount namespace
    (``unshare -rm``, no root needed), and the second agent fills it with a runaway log. The resumed run,
    once the runner freed the cut trial's folder, finishes in the same namespace."""
    if not _unshare_works():
        skip_or_fail_in_ci("unshare cannot make a user and mount namespace with a tmpfs here (util-linux, unprivileged user namespaces)")
    b = setup_bench(tmp_path)
    manifest = write_manifest(b, manifest_obj(b, {"fix-a": "solved"}))
    runs, out = tmp_path / "runs", tmp_path / "out"
    runs.mkdir()
    out.mkdir()
    env = _env(b, FAKE_CLAUDE_FILL_DISK_ONCE=str(tmp_path / "filled"), FAKE_CLAUDE_FILL_AT="2")
    script = ('mount -t tmpfs -o size=1m tmpfs "$RUNS" || exit 99\n'
              '"$@" 2> "$OUT/err1"; echo $? > "$OUT/rc1"\n'
              'cp "$RUNS/full_run.json" "$OUT/failed.json"; cp "$OUT/../full_run.json" "$OUT/failed-output.json"\n'
              '"$@" 2> "$OUT/err2"; echo $? > "$OUT/rc2"\n'
              'cp "$RUNS/full_run.json" "$OUT/resumed.json"\n')
    proc = subprocess.run(["unshare", "-rm", "sh", "-c", script, "sh", *_cmd(b, manifest, runs, "-q", runs_per_condition=1)],
                          cwd=ROOT, env={**env, "RUNS": str(runs), "OUT": str(out)}, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    err = (out / "err1").read_text()
    assert (out / "rc1").read_text().strip() == "1", err
    lines = err.strip().splitlines()
    assert len(lines) == 1, err  # one line, no traceback
    assert lines[0].startswith(f"error: cannot write into the runs folder {runs}: No space left on device (.bench/staging/")
    assert "1 of 2 trials finished and journaled; make room and re-run the same command to resume" in lines[0]
    failed = json.loads((out / "failed.json").read_text())
    assert failed["status"] == "failed" and failed["error"].startswith("cannot write into the runs folder: No space left on device")
    assert failed["error"].endswith(lines[0].split(": ", 2)[2]) and str(tmp_path) not in failed["error"]
    assert failed["summary"]["finished"] == 1
    assert json.loads((out / "failed-output.json").read_text())["status"] == "failed"  # the --output copy too
    assert (out / "rc2").read_text().strip() == "0", (out / "err2").read_text()
    resumed = json.loads((out / "resumed.json").read_text())
    assert resumed["status"] == "complete" and resumed["summary"]["finished"] == 2
    assert [t["status"] for t in resumed["trials"]] == ["completed", "completed"]


def test_resuming_with_another_analysis_plan_is_refused_unless_forced(tmp_path, run_cli, monkeypatch):
    b = setup_bench(tmp_path)
    use_bench(b, monkeypatch)
    manifest = write_manifest(b, manifest_obj(b, {"fix-a": "solved"}))
    runs = tmp_path / "runs"
    args = ["bench", "full", "--manifest", str(manifest), "--runs-per-condition", "1", "--phase-budget-usd", "100",
            "--seed", "5", "--output", str(tmp_path / "full_run.json"), "--runs-dir", str(runs), "-q"]
    first = run_cli(*args, "--analysis-plan", str(ROOT / "params" / "analysis_plan.yaml"))
    assert first.returncode == 0, first.stderr
    record = json.loads((runs / "analysis_plan.lock.json").read_text())
    other = ROOT / "params" / "analysis_plan_all_repetitions.yaml"
    refused = run_cli(*args, "--analysis-plan", str(other))
    assert refused.returncode == 2
    assert refused.stderr.count("\n") == 1 and "differs from the one pre-registered before the first trial" in refused.stderr
    assert "pass --force" in refused.stderr
    forced = run_cli(*args, "--analysis-plan", str(other), "--force")
    assert forced.returncode == 0, forced.stderr
    assert "warning: " in forced.stderr and "running on with it (--force)" in forced.stderr
    # The pre-registration is the record of what was planned before the data: never rewritten.
    assert json.loads((runs / "analysis_plan.lock.json").read_text()) == record
