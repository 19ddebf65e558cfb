"""An output folder holds one analysis: ``python -m analysis_lib RUNS -o OUT`` under faults.

Two analyses into one folder, kill -9 and Ctrl-C in the middle of one (and in the middle of its commit), the runs
folder taken away under it, an analysis that can compare nothing, an output path that is a file, a read-only folder
and a full disk. The analyses are real ``python -m analysis_lib`` processes; the judge step they are stopped in
waits on a real loopback OpenAI-compatible server (``tests/llm_server.py``) until the test lets it answer.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pandas as pd
import psutil
import pytest
from builders import agent_step, small_runs, trajectory, write_trial
from ci_rule import skip_or_fail_in_ci
from judge_fakes import answer_for
from llm_server import Reply

from analysis_lib.core import output_set
from analysis_lib.core.lock import BUSY_EXIT_CODE
from analysis_lib.core.outputs import COMPARISONS, METRICS_DETAIL, OUTPUT_MANIFEST, PLAN_RECORD, PLAN_SIDECAR, STAGING_DIR

ROOT = Path(__file__).resolve().parents[1]


def _env(tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not any(w in k.upper() for w in ("KEY", "TOKEN", "SECRET"))}
    return {**env, "PYTHONPATH": str(ROOT), "ANALYSIS_LIB_LLM_CACHE": str(tmp_path / "llm-cache")}


def _analysis(tmp_path: Path, runs: Path, out: Path, *extra: str) -> subprocess.Popen:
    """A real ``python -m analysis_lib RUNS -o OUT -q`` (its own process group, so that a test can stop it alone)."""
    return subprocess.Popen([sys.executable, "-m", "analysis_lib", str(runs), "-o", str(out), "-q", *extra], cwd=ROOT,
                            env=_env(tmp_path), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)


def _judged(url: str) -> list[str]:
    return ["--model", "openai/loopback-judge", "--api-base", url, "--concurrency", "1"]


def _gate(llm_server) -> threading.Event:
    """Hold every judgement until the returned event is set: an analysis waits in its ``llm`` step."""
    gate = threading.Event()

    def answer(body: dict) -> Reply:
        gate.wait(120)
        return Reply(answer_for(body))

    llm_server.default = answer
    return gate


def _wait_for_step(out: Path, step: str, proc: subprocess.Popen, timeout: float = 120) -> None:
    """Until the analysis writing ``out`` records that it is in ``step`` (its staging folder's run record)."""
    record = out / STAGING_DIR / ".run.json"
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert proc.poll() is None, proc.communicate()
        try:
            if json.loads(record.read_text()).get("step") == step:
                return
        except (OSError, ValueError):
            pass
        time.sleep(0.05)
    raise AssertionError(f"the analysis never reached step {step}")


def _snapshot(out: Path) -> dict[str, bytes]:
    """Every file of the folder but its locks, caches and staging folder."""
    return {p.relative_to(out).as_posix(): p.read_bytes() for p in sorted(out.rglob("*"))
            if p.is_file() and not any(part.startswith(".") for part in p.relative_to(out).parts)}


def _committed(tmp_path: Path, runs: Path, out: Path, *extra: str) -> output_set.Manifest:
    proc = _analysis(tmp_path, runs, out, "--no-llm", *extra)
    _, err = proc.communicate(timeout=300)
    assert proc.returncode in (0, 1), err
    return output_set.check_set(out, label=str(out))


def _disjoint_runs(root: Path) -> Path:
    """Two arms that share no task: the design supports no comparison."""
    for p_i, profile in enumerate(["base", "mcp"]):
        for t in range(3):
            traj = trajectory([agent_step(1, [("Read", {"file_path": "a.py"})], prompt=1000, completion=100)])
            write_trial(root, f"2026-01-0{p_i + 1}__10-00-00__{profile}", f"task-{t + 3 * p_i}", traj=traj, reward="1\n")
    return root


# --------------------------------------------------------------------------- the set and its commit


def test_a_commit_replaces_the_set_and_keeps_what_the_user_put_there(tmp_path):
    out = tmp_path / "out"
    with output_set.locked([(out, "out")], "test"):
        st = output_set.prepare(out, label="out", command="analysis", keep=[out / PLAN_RECORD])
        st.begin("layer1")
        for name in ("a.csv", "sub/b.csv", PLAN_RECORD):
            (st.root / name).parent.mkdir(parents=True, exist_ok=True)
            (st.root / name).write_text(f"first {name}")
        st.begin("comparisons")
        (st.root / "c.csv").write_text("first c")
        first = st.commit(steps=["layer1", "comparisons"], inputs={"runs": "a"})
    assert sorted(first.files) == ["a.csv", "c.csv", "sub/b.csv"]  # the plan record belongs to the folder, not a set
    assert (first.files["a.csv"].step, first.files["c.csv"].step) == ("layer1", "comparisons")
    (out / "notes.md").write_text("mine")  # the user's
    (out / "sub" / "b.csv").write_text("edited by hand")  # a file of the set, changed since: the user's now
    with output_set.locked([(out, "out")], "test"):
        st = output_set.prepare(out, label="out", command="analysis", keep=[out / PLAN_RECORD])
        assert (st.root / PLAN_RECORD).read_text() == f"first {PLAN_RECORD}"  # the record is read where it is written
        st.begin("layer1")
        (st.root / "a.csv").write_text("second a")
        (st.root / PLAN_RECORD).write_text("a second record")  # never replaces the first one
        second = st.commit(steps=["layer1"], inputs={"runs": "b"})
    assert sorted(second.files) == ["a.csv"]
    assert (out / "a.csv").read_text() == "second a"
    assert not (out / "c.csv").exists()  # the previous set's file that the new one does not hold
    assert (out / "notes.md").read_text() == "mine" and (out / "sub" / "b.csv").read_text() == "edited by hand"
    assert (out / PLAN_RECORD).read_text() == f"first {PLAN_RECORD}"
    assert not (out / STAGING_DIR).exists()
    assert output_set.check_set(out, label="out").run_id == second.run_id


def test_a_reader_refuses_a_set_that_is_incomplete_or_changed_in_one_line(tmp_path):
    out = tmp_path / "out"
    with pytest.raises(output_set.OutputSetError, match=r"^output folder out holds no complete output set \(no "):
        output_set.check_set(out, label="out")
    with output_set.locked([(out, "out")], "test"):
        st = output_set.prepare(out, label="out", command="analysis")
        (st.root / "a.csv").write_text("a")
        (st.root / "b.csv").write_text("b")
        m = st.commit(steps=["layer1"], inputs={})
    (out / "a.csv").write_text("A")
    with pytest.raises(output_set.OutputSetError) as changed:
        output_set.check_set(out, label="out")
    assert str(changed.value) == (f"output folder out: out/a.csv changed since {m.line()} wrote it: the set is not that "
                                  "run's any more; run the command that made it again")
    (out / "a.csv").unlink()
    with pytest.raises(output_set.OutputSetError, match=r"out/a.csv of run .* is missing: the set is incomplete"):
        output_set.check_set(out, label="out")


COMMIT_CUT = textwrap.dedent("""
    import os, signal, sys
    from pathlib import Path
    from analysis_lib.core import output_set
    out, cut = Path(sys.argv[1]), int(sys.argv[2])
    real_move, moved = output_set._move, []

    def move(src, dst):  # the fault: kill -9 of this process after `cut` files were moved into place
        if len(moved) == cut:
            os.kill(os.getpid(), signal.SIGKILL)
        real_move(src, dst)
        moved.append(dst)

    output_set._move = move
    with output_set.locked([(out, "out")], "test"):
        st = output_set.prepare(out, label="out", command="analysis")
        for i in range(4):
            (st.root / f"f{i}.csv").write_text(f"new {i}")
        st.commit(steps=["layer1"], inputs={"set": "new"})
""")


@pytest.mark.parametrize("cut", [0, 1, 3])
def test_kill_9_in_the_middle_of_a_commit_leaves_a_set_the_next_command_completes(tmp_path, cut):
    out = tmp_path / "out"
    with output_set.locked([(out, "out")], "test"):
        st = output_set.prepare(out, label="out", command="analysis")
        for i in range(3):
            (st.root / f"f{i}.csv").write_text(f"old {i}")
        (st.root / "old_only.csv").write_text("old")
        old = st.commit(steps=["layer1"], inputs={"set": "old"})
    proc = subprocess.run([sys.executable, "-c", COMMIT_CUT, str(out), str(cut)], cwd=ROOT, env=_env(tmp_path),
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    # Cut in the middle: some files are new, the manifest still the old one, and a reader can tell.
    assert json.loads((out / OUTPUT_MANIFEST).read_text())["run_id"] == old.run_id
    assert json.loads((out / STAGING_DIR / ".run.json").read_text())["status"] == "committing"
    # The next reader finishes the commit (roll forward): the new set, complete, and nothing of the old one.
    new = output_set.check_set(out, label="out")
    assert new.inputs == {"set": "new"} and sorted(new.files) == ["f0.csv", "f1.csv", "f2.csv", "f3.csv"]
    assert [(out / f"f{i}.csv").read_text() for i in range(4)] == [f"new {i}" for i in range(4)]
    assert not (out / "old_only.csv").exists() and not (out / STAGING_DIR).exists()


def test_a_partial_run_refuses_to_build_on_a_folder_whose_last_run_did_not_finish(tmp_path):
    out = tmp_path / "out"
    with output_set.locked([(out, "out")], "test"):
        st = output_set.prepare(out, label="out", command="paper")
        (st.root / "a.csv").write_text("a")
        kept = st.commit(steps=["01_metrics"], inputs={})
        st = output_set.prepare(out, label="out", command="paper")
        st.begin("02_stats")
        st.fail("ValueError: broken")
        with pytest.raises(output_set.OutputSetError) as refused:
            output_set.settle(out, label="out", partial=True)
    line = str(refused.value)
    assert line == (f"output folder out: its last run (paper, run {st.record.run_id}, started {st.record.started_at}) "
                    f"failed during 02_stats (ValueError: broken) and was not committed; it still holds {kept.line()}; "
                    "run the whole pipeline (without --only)")
    notes: list[str] = []
    with output_set.locked([(out, "out")], "test"):  # a whole run clears it, and says so
        output_set.prepare(out, label="out", command="paper", warn=notes.append).discard()
    assert notes == [f"note: output folder out: removed what run {st.record.run_id} left; it failed during 02_stats "
                     "(ValueError: broken)"]


# --------------------------------------------------------------------------- the analysis


def test_an_analysis_that_compares_nothing_removes_the_previous_comparisons_and_keeps_the_users_files(tmp_path, run_cli):
    out = tmp_path / "out"
    first = run_cli(small_runs(tmp_path / "a"), "-o", out, "--no-llm", "-q")
    assert first.returncode == 0, first.stderr
    assert (out / COMPARISONS).exists() and (out / "comparison_report.md").exists()
    (out / "my_notes.md").write_text("mine")
    second = run_cli(_disjoint_runs(tmp_path / "b"), "-o", out, "--no-llm", "-q")
    assert second.returncode == 1
    assert "error: the design cannot support the planned comparisons" in second.stderr
    manifest = output_set.check_set(out, label=str(out))
    assert COMPARISONS not in manifest.files and manifest.steps == ["layer1", "comparisons"]
    # Nothing of the first study's comparisons is left beside the second study's Layer 1 files.
    assert not (out / COMPARISONS).exists() and not (out / "comparison_report.md").exists()
    assert set(_snapshot(out)) == set(manifest.files) | {"my_notes.md", PLAN_RECORD, OUTPUT_MANIFEST}
    assert (out / "my_notes.md").read_text() == "mine"


@pytest.mark.slow  # three real analyses (subprocesses), the first held in its judge step
def test_two_analyses_into_one_folder_at_staggered_starts(tmp_path, llm_server):
    out = tmp_path / "out"
    runs_a, runs_b = small_runs(tmp_path / "a"), small_runs(tmp_path / "b", n_tasks=4)
    gate = _gate(llm_server)
    first = _analysis(tmp_path, runs_a, out, *_judged(llm_server.url))
    try:
        _wait_for_step(out, "llm", first)
        second = _analysis(tmp_path, runs_b, out, "--no-llm")
        _, err = second.communicate(timeout=120)
        # The second is refused at once, in one line naming the folder and the first (its pid), and writes nothing.
        assert second.returncode == BUSY_EXIT_CODE
        assert err.strip().splitlines() == [err.strip()]
        assert err.startswith(f"error: output folder {out} is in use by pid {first.pid} on ")
        assert f"(analysis of {runs_a})" in err
    finally:
        gate.set()
    _, err = first.communicate(timeout=300)
    assert first.returncode == 0, err
    a = output_set.check_set(out, label=str(out))  # one complete set: the first analysis'
    assert set(a.files) >= {METRICS_DETAIL, COMPARISONS, "layer2_summary.json"} and a.inputs["runs_dir"] == runs_a.name
    # Started after the first ended, the next replaces its set whole: nothing of the first is left.
    b = _committed(tmp_path, runs_b, out)
    assert b.inputs["runs_dir"] == runs_b.name and "layer2_summary.json" not in b.files
    assert set(_snapshot(out)) == set(b.files) | {PLAN_RECORD, OUTPUT_MANIFEST}
    assert sorted(set(pd.read_csv(out / METRICS_DETAIL)["task_id"])) == ["task-0", "task-1", "task-2", "task-3"]


@pytest.mark.slow  # real analyses, one stopped by kill -9, one by Ctrl-C in their judge step
@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGINT])
def test_an_analysis_stopped_in_the_middle_leaves_the_previous_set_intact(tmp_path, llm_server, sig):
    out = tmp_path / "out"
    runs_a, runs_b = small_runs(tmp_path / "a"), small_runs(tmp_path / "b", n_tasks=4)
    before = _committed(tmp_path, runs_a, out)
    files = _snapshot(out)
    gate = _gate(llm_server)
    proc = _analysis(tmp_path, runs_b, out, *_judged(llm_server.url))
    try:
        _wait_for_step(out, "llm", proc)  # Layer 1 and the comparisons of runs_b are written, staged
        proc.send_signal(sig)
        _, err = proc.communicate(timeout=120)
    finally:
        gate.set()
    assert _snapshot(out) == files and output_set.check_set(out, label=str(out)).run_id == before.run_id
    if sig == signal.SIGINT:
        assert proc.returncode == 130
        assert "Traceback" not in err and err.strip().splitlines()[-1] == f"interrupted: {out} still holds {before.line()}"
        assert not (out / STAGING_DIR).exists()
    else:
        assert proc.returncode == -signal.SIGKILL
    after = _analysis(tmp_path, runs_b, out, "--no-llm")
    _, err = after.communicate(timeout=300)
    assert after.returncode == 0, err
    if sig == signal.SIGKILL:
        assert "it was stopped during llm (killed, or its machine stopped)" in err  # what it cleared
    assert output_set.check_set(out, label=str(out)).inputs["runs_dir"] == runs_b.name


@pytest.mark.slow  # a real analysis held in its judge step while its runs folder is removed
def test_the_runs_folder_removed_during_an_analysis_fails_it_in_one_line(tmp_path, llm_server):
    out, runs = tmp_path / "out", small_runs(tmp_path / "runs")
    gate = _gate(llm_server)
    proc = _analysis(tmp_path, runs, out, *_judged(llm_server.url))
    try:
        _wait_for_step(out, "llm", proc)
        shutil.rmtree(runs)
    finally:
        gate.set()
    _, err = proc.communicate(timeout=300)
    assert proc.returncode == 1
    assert err.strip().splitlines()[-1] == (f"error: the runs folder {runs.name} is gone: nothing was committed; {out} holds "
                                            "no complete output set")
    assert not (out / OUTPUT_MANIFEST).exists() and not (out / STAGING_DIR).exists()


def test_runs_changed_since_the_study_read_them_are_named(tmp_path):
    from analysis_lib.study.study import open_study

    runs = small_runs(tmp_path / "runs")
    study = open_study(runs)
    assert study.inputs_changed() is None
    reward = next(runs.glob("*__mcp/task-1/verifier/reward.txt"))
    reward.write_text("0\n")
    os.utime(reward, ns=(1, 1))  # a rewrite within the same clock tick still changes the mtime
    write_trial(runs, "2026-01-02__10-00-00__mcp", "task-9", traj=trajectory([agent_step(1)]))
    line = study.inputs_changed()
    assert line is not None and line.startswith("the runs folder runs changed while it was analysed: ")
    assert "1 changed (first: 2026-01-02__10-00-00__mcp/task-1)" in line and "1 added (first: " in line


def test_an_output_path_that_is_a_file_is_refused_before_any_work(tmp_path, run_cli):
    runs = small_runs(tmp_path / "runs")
    (tmp_path / "out.csv").write_text("a file")
    res = run_cli(runs, "-o", tmp_path / "out.csv", "--no-llm", "-q")
    assert res.returncode == 2
    assert res.stderr == f"error: output folder {tmp_path / 'out.csv'} is a file, not a folder; nothing was run or written\n"
    res = run_cli(runs, "-o", tmp_path / "out.csv" / "inner", "--no-llm", "-q")
    assert res.returncode == 2 and res.stderr.count("\n") == 1
    assert "cannot be written (a file stands where a folder is needed); nothing was run or written" in res.stderr
    assert (tmp_path / "out.csv").read_text() == "a file"


def _unshare_works() -> bool:
    if shutil.which("unshare") is None:
        return False
    probe = subprocess.run(["unshare", "-rm", "sh", "-c", "mount -t tmpfs -o size=64k tmpfs /mnt"], capture_output=True,
                           timeout=30)
    return probe.returncode == 0


@pytest.mark.slow  # analyses in a private mount namespace (read-only folder, a small tmpfs)
def test_a_read_only_or_full_output_folder_ends_in_one_line_and_keeps_the_previous_set(tmp_path):
    """A real read-only folder and a real full disk: bind mounts and a 1 MB tmpfs in a private user and mount namespace
    (``unshare -rm``, no root needed)."""
    if not _unshare_works():
        skip_or_fail_in_ci("unshare cannot make a user and mount namespace with a tmpfs here (util-linux, unprivileged "
                           "user namespaces)")
    runs, ro, full, logs = small_runs(tmp_path / "runs"), tmp_path / "ro", tmp_path / "full", tmp_path / "logs"
    for d in (ro, full, logs):
        d.mkdir()
    analysis = f'"{sys.executable}" -m analysis_lib "{runs}" --no-llm -q'
    script = textwrap.dedent(f"""
        mount --bind "{ro}" "{ro}" && mount -o remount,ro,bind "{ro}" || exit 99
        {analysis} -o "{ro}/out" 2> "{logs}/ro.err"; echo $? > "{logs}/ro.rc"
        mount -t tmpfs -o size=1m tmpfs "{full}" || exit 98
        {analysis} -o "{full}" 2> "{logs}/first.err"; echo $? > "{logs}/first.rc"
        cp "{full}/{OUTPUT_MANIFEST}" "{logs}/first.json"
        # Fill the disk but for the size of the set: the analysis is refused before any work.
        need=$("{sys.executable}" -c 'import json; print(sum(f["bytes"] for f in json.load(open("{logs}/first.json"))["files"].values()))')
        free=$("{sys.executable}" -c 'import shutil; print(shutil.disk_usage("{full}").free)')
        head -c $((free - need + 4096)) /dev/zero > "{full}/ballast" 2>/dev/null
        {analysis} -o "{full}" 2> "{logs}/refused.err"; echo $? > "{logs}/refused.rc"
        # Room for the set's bytes, not for its files' blocks: the disk fills up while the analysis writes.
        rm "{full}/ballast"; free=$("{sys.executable}" -c 'import shutil; print(shutil.disk_usage("{full}").free)')
        head -c $((free - need - 8192)) /dev/zero > "{full}/ballast" 2>/dev/null
        {analysis} -o "{full}" 2> "{logs}/full.err"; echo $? > "{logs}/full.rc"
        cp "{full}/{OUTPUT_MANIFEST}" "{logs}/after.json"
        ls -a "{full}" > "{logs}/after.ls"
    """)
    proc = subprocess.run(["unshare", "-rm", "sh", "-c", script], cwd=ROOT, env=_env(tmp_path), capture_output=True,
                          text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    read = lambda name: (logs / name).read_text().strip()  # noqa: E731
    assert read("ro.rc") == "2"
    assert read("ro.err") == f"error: output folder {ro}/out cannot be written (Read-only file system); nothing was run or written"
    assert read("first.rc") == "0", read("first.err")
    first = json.loads(read("first.json"))
    assert read("refused.rc") == "2"
    assert read("refused.err").startswith(f"error: output folder {full}: ")
    assert read("refused.err").endswith("(the new one is written beside it first): make room; nothing was run or written")
    assert read("full.rc") == "1"
    assert read("full.err").splitlines()[-1] == (f"error: output folder {full} cannot be written (No space left on device): "
                                                 f"nothing was committed; {full} still holds run {first['run_id']} "
                                                 f"(analysis, committed {first['committed_at']})")
    assert json.loads(read("after.json")) == first  # the previous set, as it was
    assert STAGING_DIR not in read("after.ls").split()


# --------------------------------------------------------------------------- RESULTS.md


@pytest.fixture(scope="module")
def bench_record(tmp_path_factory) -> Path:
    """A benchmark runner's ``full_run.json`` of simulated runs (6 tasks x 2 runs x 3 conditions, every verdict)."""
    from analysis_lib.simulate.full_run import write_full_run
    from analysis_lib.simulate.model import Effects
    from analysis_lib.simulate.runs import simulate_runs

    root = tmp_path_factory.mktemp("bench")
    simulate_runs(root / "runs", seed=5, n_tasks=6, repetitions=2, effects=Effects(n_infra_errors=0))
    return write_full_run(root / "runs", root / "results" / "full_run.json")


@pytest.mark.slow  # RESULTS.md twice, the second a real subprocess stopped by Ctrl-C
def test_results_and_their_plots_are_one_set_that_ctrl_c_leaves_as_it_was(bench_record, tmp_path):
    from analysis_lib.cli.results import cli

    report, plots = tmp_path / "RESULTS.md", tmp_path / "plots"
    args = [str(bench_record), "--output", str(report), "--plots", str(plots), "--plan", str(ROOT / "params" / "analysis_plan.yaml")]
    assert cli(args) == 0
    first = output_set.check_set(plots, label=str(plots))
    assert sorted(first.files) == ["../RESULTS.md", "exploratory.png", "primary_effects.png", "secondary_effects.png"]
    assert "- `plots/primary_effects.png`: " in report.read_text()  # named where it is, never in the staging folder
    before = {p: p.read_bytes() for p in [report, *plots.glob("*.png")]}
    proc = subprocess.Popen([sys.executable, "-m", "analysis_lib", "results", *args], cwd=ROOT, env=_env(tmp_path),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    record = plots / STAGING_DIR / ".run.json"
    deadline = time.monotonic() + 120
    while not record.exists() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.02)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err
    assert err.strip() == f"interrupted: nothing was written; {plots} still holds {first.line()}"
    assert {p: p.read_bytes() for p in [report, *plots.glob("*.png")]} == before
    assert not (plots / STAGING_DIR).exists()


def test_results_are_refused_while_the_runner_still_writes_the_runs_folder(bench_record, tmp_path, capsys):
    from analysis_lib.bench.journal import state_dir
    from analysis_lib.bench.runner import LOCK_FILE
    from analysis_lib.cli.results import cli

    runs = bench_record.parent.parent / "runs"
    hold = textwrap.dedent("""
        import sys, time
        from analysis_lib.core.lock import folder_lock
        with folder_lock(sys.argv[1], what="runs folder", lock_file=sys.argv[2], command="bench"):
            print("held", flush=True)
            time.sleep(120)
    """)
    runner = subprocess.Popen([sys.executable, "-c", hold, str(runs), str(state_dir(runs) / LOCK_FILE)], cwd=ROOT,
                              env=_env(tmp_path), stdout=subprocess.PIPE, text=True)
    try:
        assert runner.stdout is not None and runner.stdout.readline().strip() == "held"
        state = sorted(p.name for p in state_dir(runs).iterdir())
        code = cli([str(bench_record), "--output", str(tmp_path / "RESULTS.md")])
    finally:
        runner.kill()
        runner.wait()
    assert code == BUSY_EXIT_CODE
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(f"error: runs folder runs is in use by pid {runner.pid} on ")
    assert err.rstrip().endswith("(bench); wait for it to finish or stop it, then retry; the benchmark run is not "
                                 "finished, so nothing was reported")
    assert not (tmp_path / "RESULTS.md").exists()
    assert sorted(p.name for p in state_dir(runs).iterdir()) == state  # the runs folder is only read


def test_pooling_reads_an_analysed_study_only_from_its_complete_set(tmp_path, run_cli):
    outs = []
    for i in range(3):
        outs.append(tmp_path / f"out{i}")
        assert run_cli(small_runs(tmp_path / f"runs{i}", n_tasks=4 + i), "-o", outs[-1], "--no-llm", "-q").returncode == 0
    changed = outs[0] / COMPARISONS
    changed.write_text(changed.read_text().replace("success", "succes", 1))  # edited after its analysis
    res = run_cli("meta", *outs, "--metric", "success", "-o", tmp_path / "pooled")
    m = output_set.read_manifest(outs[0])
    assert res.returncode == 0, res.stderr
    assert res.stderr.splitlines()[0] == (f"error: output folder {outs[0]}: {changed} changed since {m.line()} wrote it: "
                                          "the set is not that run's any more; run the command that made it again; left out")
    assert "pooled over 2 studies" in res.stdout


@pytest.mark.slow  # four analyses, one with the judges against the loopback server (litellm's import)
def test_the_steps_an_analysis_skips_are_kept_from_a_set_of_the_same_inputs(tmp_path, run_cli, llm_server):
    llm_server.default = lambda body: Reply(answer_for(body))
    runs, out = small_runs(tmp_path / "runs"), tmp_path / "out"
    judge = ["--model", "openai/loopback-judge", "--api-base", llm_server.url]
    assert run_cli(runs, "-o", out, "--no-llm", "-q").returncode == 0
    first = output_set.check_set(out, label="out")
    res = run_cli(runs, "-o", out, "--llm-only", "-q", *judge)  # the judges alone: the comparisons stay
    assert res.returncode == 0, res.stderr
    judged = output_set.check_set(out, label="out")
    assert judged.steps == ["layer1", "comparisons", "llm"] and judged.carried == {"comparisons": first.run_id}
    # The comparisons' files, byte for byte (the plan sidecar both steps write is Layer 1's again).
    assert {k: f.sha256 for k, f in judged.files.items() if f.step == "comparisons"} == \
        {k: f.sha256 for k, f in first.files.items() if f.step == "comparisons" and k != PLAN_SIDECAR}
    assert "layer2_summary.json" in judged.files
    res = run_cli(runs, "-o", out, "--no-llm", "-q")  # the statistics again: the judges' records stay
    assert res.returncode == 0, res.stderr
    again = output_set.check_set(out, label="out")
    assert again.carried == {"llm": judged.run_id} and "layer2_summary.json" in again.files
    # Other runs: what the previous set's judges said of its trials is not carried over to these.
    res = run_cli(small_runs(tmp_path / "other", n_tasks=4), "-o", out, "--no-llm", "-q")
    assert res.returncode == 0, res.stderr
    assert f"note: the llm outputs of {again.line()} were made from other inputs (runs, study file, plan or " \
           "selection): not kept" in res.stderr
    other = output_set.check_set(out, label="out")
    assert other.carried == {} and "layer2_summary.json" not in other.files and not (out / "layer2_summary.json").exists()


@pytest.mark.slow  # a real analysis of the 216 sample trials in a pool of two reader workers
def test_ctrl_c_of_the_terminal_while_the_reader_workers_run_ends_the_analysis_in_one_line(tmp_path, sample_runs):
    """A terminal's Ctrl-C reaches the whole process group: the analysis and its reader workers."""
    out = tmp_path / "out"
    proc = _analysis(tmp_path, sample_runs, out, "--no-llm", "--no-cache", "--workers", "2")
    deadline = time.monotonic() + 120
    workers: list = []
    while len(workers) < 2 and proc.poll() is None and time.monotonic() < deadline:
        workers = psutil.Process(proc.pid).children()
        time.sleep(0.01)
    assert len(workers) == 2, "the reader pool never started"
    os.killpg(proc.pid, signal.SIGINT)
    _, err = proc.communicate(timeout=60)  # it used to wait forever for the interrupted workers
    assert proc.returncode == 130
    assert "Traceback" not in err and err.strip().splitlines()[-1] == f"interrupted: {out} holds no complete output set"
    _, alive = psutil.wait_procs(workers, timeout=30)
    assert alive == []
    assert not (out / OUTPUT_MANIFEST).exists()
