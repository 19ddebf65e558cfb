"""The paper pipeline's output folders hold one run: ``python -m analysis_lib paper`` under faults.

Each test builds a throwaway project (the real notebooks, ``paper/main.tex``, the analysis plan and seeded simulated
runs) and runs the real command in a subprocess: a crash in notebook 02 followed by ``--only 05_paper``, the runs
folder removed while notebook 02 runs, Ctrl-C and kill -9 in the middle, folders that cannot be written.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import psutil
import pytest
from ci_rule import skip_or_fail_in_ci

from analysis_lib.cli import pipeline
from analysis_lib.core import output_set
from analysis_lib.core.outputs import OUTPUT_MANIFEST, STAGING_DIR
from analysis_lib.simulate.model import Effects
from analysis_lib.simulate.runs import simulate_runs

ROOT = Path(__file__).resolve().parents[1]
HOME = "results/study"  # the output_dir of every parameter file below


def _project(tmp_path: Path) -> Path:
    root = tmp_path / "project"
    shutil.copytree(ROOT / "notebooks", root / "notebooks", ignore=shutil.ignore_patterns(".ipynb_checkpoints"))
    (root / "params").mkdir()
    shutil.copyfile(ROOT / "params" / "analysis_plan.yaml", root / "params" / "analysis_plan.yaml")
    (root / "paper").mkdir()
    shutil.copyfile(ROOT / "paper" / "main.tex", root / "paper" / "main.tex")
    simulate_runs(root / "runs" / "a", seed=7, n_tasks=8, repetitions=1, effects=Effects(n_infra_errors=0))
    simulate_runs(root / "runs" / "b", seed=8, n_tasks=6, repetitions=1, effects=Effects(n_infra_errors=0))
    return root


def _params(root: Path, name: str, **values: str) -> Path:
    path = root / f"{name}.yaml"
    path.write_text("".join(f"{k}: {v}\n" for k, v in {"output_dir": HOME, **values}.items()))
    return path


def _paper(root: Path, params: Path, *extra: str, wait: bool = True):
    cmd = [sys.executable, "-m", "analysis_lib", "paper", "--params", params.name, "--root", str(root), "--no-latex", "-q",
           *extra]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    if not wait:
        return subprocess.Popen(cmd, cwd=root, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                start_new_session=True)
    return subprocess.run(cmd, cwd=root, env=env, capture_output=True, text=True, timeout=900)


def _outputs(root: Path) -> dict[str, bytes]:
    """Every file the pipeline's folders hold, but locks and the staging folder."""
    out = {}
    for folder in (root / "results", root / "figures", root / "paper"):
        for p in sorted(folder.rglob("*")) if folder.exists() else []:
            rel = p.relative_to(root)
            if p.is_file() and not any(part.startswith(".") for part in rel.parts):
                out[rel.as_posix()] = p.read_bytes()
    return out


def _wait_for_notebook(root: Path, name: str, proc: subprocess.Popen, timeout: float = 300) -> dict:
    """Until the pipeline ``proc`` records that it runs notebook ``name`` (its own record, not one an earlier run left)."""
    record = root / HOME / STAGING_DIR / ".run.json"
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert proc.poll() is None, proc.communicate()
        try:
            rec = json.loads(record.read_text())
            if rec.get("step") == name and rec.get("pid") == proc.pid:
                return rec
        except (OSError, ValueError):
            pass
        time.sleep(0.05)
    raise AssertionError(f"the pipeline never reached notebook {name}")


def _one_line(stderr: str) -> str:
    lines = stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in stderr, stderr
    return lines[0]


@pytest.mark.slow  # four real paper pipelines (papermill kernels), one of them whole
def test_paper_only_after_a_crash_in_notebook_02_is_refused_naming_the_run_and_the_notebook(tmp_path):
    root = _project(tmp_path)
    a = _params(root, "a", runs_dir="runs/a")
    done = _paper(root, a)
    assert done.returncode == 0, done.stderr
    first = output_set.check_set(root / HOME, label=HOME)
    assert first.steps == list(pipeline.PIPELINE_NOTEBOOKS)
    assert {"../../figures/forest.png", "../../paper/snippets/macros.tex", "notebooks/05_paper.ipynb"} <= set(first.files)
    # A partial run builds on the set it checked: 05 again, the other notebooks' files kept from the run that made them.
    again = _paper(root, a, "--only", "05_paper")
    assert again.returncode == 0, again.stderr
    rebuilt = output_set.check_set(root / HOME, label=HOME)
    assert rebuilt.carried == {n: first.run_id for n in pipeline.PIPELINE_NOTEBOOKS[:-1]}
    assert {k: f.sha256 for k, f in rebuilt.files.items() if f.step != "05_paper"} == \
        {k: f.sha256 for k, f in first.files.items() if f.step != "05_paper"}
    before = _outputs(root)
    # Another study whose notebook 02 fails: nothing of it is committed.
    crash = _paper(root, _params(root, "b_crash", runs_dir="runs/b", task_groups="missing.csv"))
    assert crash.returncode == 1
    line = _one_line(crash.stderr)
    assert line.startswith("error: notebook 02_stats.ipynb failed in cell ") and "task groups not readable" in line
    assert line.endswith(f"(executed copy with the traceback: {HOME}/{STAGING_DIR}/{HOME}/notebooks/02_stats.ipynb); "
                         f"nothing was committed: {HOME} still holds {rebuilt.line()}")
    assert (root / HOME / STAGING_DIR / HOME / "notebooks" / "02_stats.ipynb").is_file()
    assert _outputs(root) == before
    failed = json.loads((root / HOME / STAGING_DIR / ".run.json").read_text())
    assert (failed["status"], failed["step"]) == ("failed", "02_stats")
    # The paper of that study is refused, in one line naming the run and the notebook it stopped in; and so is any
    # partial run, until a whole one went through.
    for params in (_params(root, "b", runs_dir="runs/b"), a):
        refused = _paper(root, params, "--only", "05_paper")
        assert refused.returncode == 2
        assert _one_line(refused.stderr) == (
            f"error: output folder {HOME}: its last run (paper, run {failed['run_id']}, started {failed['started_at']}) "
            f"failed during 02_stats ({failed['error']}) and was not committed; it still holds {rebuilt.line()}; run the "
            "whole pipeline (without --only)")
    assert _outputs(root) == before


@pytest.mark.slow  # a real paper pipeline whose runs folder goes away while notebook 02 runs
def test_the_runs_folder_removed_during_notebook_02_fails_the_pipeline_in_one_line(tmp_path):
    root = _project(tmp_path)
    proc = _paper(root, _params(root, "a", runs_dir="runs/a"), wait=False)
    _wait_for_notebook(root, "02_stats", proc)
    shutil.rmtree(root / "runs" / "a")
    _, err = proc.communicate(timeout=600)
    assert proc.returncode == 1
    assert _one_line(err) == (f"error: the runs folder runs/a is gone (seen after notebook 02_stats): nothing was "
                              f"committed; {HOME} holds no complete output set")
    # No paper with sections silently missing: no snippet, no figure, no table was put in place.
    assert _outputs(root) == {"paper/main.tex": (ROOT / "paper" / "main.tex").read_bytes()}
    assert not (root / HOME / OUTPUT_MANIFEST).exists()


def _kernels(proc: subprocess.Popen) -> list[psutil.Process]:
    return [p for p in psutil.Process(proc.pid).children(recursive=True) if "ipykernel" in " ".join(p.cmdline())]


@pytest.mark.slow  # three real paper pipelines, two stopped in notebook 02
def test_ctrl_c_and_kill_9_in_the_middle_leave_the_previous_set_and_partial_runs_are_refused(tmp_path):
    root = _project(tmp_path)
    a = _params(root, "a", runs_dir="runs/a")
    done = _paper(root, a, "--only", "00_run_benchmark", "01_metrics")  # a set of its own: 02-05 need nothing more
    assert done.returncode == 0, done.stderr
    previous = output_set.check_set(root / HOME, label=HOME)
    assert previous.steps == ["00_run_benchmark", "01_metrics"]
    before = _outputs(root)
    proc = _paper(root, a, wait=False)
    _wait_for_notebook(root, "02_stats", proc)
    kernels = _kernels(proc)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 130
    assert _one_line(err) == f"interrupted during 02_stats: nothing was committed; {HOME} still holds {previous.line()}"
    assert _outputs(root) == before
    _, alive = psutil.wait_procs(kernels, timeout=30)
    assert alive == []  # the notebook's kernel ended with the pipeline
    proc = _paper(root, a, wait=False)
    stopped = _wait_for_notebook(root, "02_stats", proc)
    kernels = _kernels(proc)
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=60)
    try:
        assert _outputs(root) == before and output_set.check_set(root / HOME, label=HOME).run_id == previous.run_id
        refused = _paper(root, a, "--only", "05_paper")
        assert refused.returncode == 2
        took_over, line = refused.stderr.strip().splitlines()  # the killed run's locks, taken over with one warning
        assert re.fullmatch(f"warning: output folders figures, paper, {HOME}: took over the locks left by pid {proc.pid} "
                            f"on {re.escape(socket.gethostname())}, started 20[0-9T:-]+Z \\(paper --params a.yaml\\), "
                            "which no longer holds them \\(it ended without releasing them\\)", took_over), took_over
        assert line == (
            f"error: output folder {HOME}: its last run (paper, run {stopped['run_id']}, started {stopped['started_at']}) "
            f"was stopped during 02_stats (killed, or its machine stopped) and was not committed; it still holds "
            f"{previous.line()}; run the whole pipeline (without --only)")
    finally:
        for k in kernels:  # a kernel outliving a killed driver ends by itself when it sees its parent gone
            psutil.wait_procs([k], timeout=30)


def test_a_partial_run_builds_only_on_a_set_it_can_use():
    allowed = pipeline.allowed_parameters(pipeline.pipeline_notebooks(ROOT / "notebooks"))
    params = {"runs_dir": "runs/a", "output_dir": HOME, "figures_dir": "figures", "task_groups": ""}
    inputs = {"runs_dir": "runs/a", "runs_sha256": "r1", "design_sha256": None, "plan_sha256": "p1", "parameters": params}
    held = output_set.Manifest(run_id="R", command="paper", started_at="s", committed_at="c", folders=["."],
                               steps=["00_run_benchmark", "01_metrics", "02_stats"], inputs=inputs, files={})
    pipeline.check_partial(held, inputs, ["02_stats"], allowed, HOME)  # 02 again on the 01 it reads
    pipeline.check_partial(None, inputs, ["01_metrics", "02_stats"], allowed, HOME)  # nothing to build on, none needed

    def refused(previous, now, selected) -> str:
        with pytest.raises(output_set.OutputSetError) as err:
            pipeline.check_partial(previous, now, selected, allowed, HOME)
        return str(err.value)

    pipeline.check_partial(held, inputs, ["05_paper"], allowed, HOME)  # the LLM and CodeCanvas sections are optional
    metrics_only = held.model_copy(update={"steps": ["00_run_benchmark", "01_metrics"]})
    assert refused(metrics_only, inputs, ["05_paper"]) == (
        f"--only 05_paper: 05_paper reads the outputs of 02_stats, which the set in {HOME} ({metrics_only.line()}) does "
        "not hold; add 02_stats to --only or run the whole pipeline")
    assert refused(None, inputs, ["02_stats"]).startswith(f"--only 02_stats: 02_stats reads the outputs of 01_metrics, "
                                                          f"which {HOME} (it holds no set) does not hold")
    assert refused(held, inputs, ["01_metrics"]) == (
        f"--only 01_metrics: the set in {HOME} ({held.line()}) keeps the outputs of 02_stats, made from the 01_metrics "
        "this run replaces; add 02_stats to --only or run the whole pipeline")
    other_runs = {**inputs, "parameters": {**params, "runs_dir": "runs/b"}}
    assert refused(held, other_runs, ["02_stats"]) == (
        f"--only 02_stats: parameter runs_dir is 'runs/b', but the set in {HOME} ({held.line()}) made 01_metrics with "
        "'runs/a'; run the whole pipeline")
    changed = {**inputs, "runs_sha256": "r2"}
    assert refused(held, changed, ["02_stats"]) == (
        f"--only 02_stats: the runs folder runs/a changed since the set in {HOME} ({held.line()}) was made; run the whole "
        "pipeline")
    # A parameter only the notebooks run again read may change.
    pipeline.check_partial(held, {**inputs, "parameters": {**params, "task_groups": "groups.csv"}}, ["02_stats"], allowed,
                           HOME)


def test_output_folders_that_are_files_are_refused_before_any_notebook_runs(tmp_path, capsys):
    root = _project(tmp_path)
    (root / "figs").write_text("not a folder")
    params = _params(root, "a", runs_dir="runs/a", figures_dir="figs")
    assert pipeline.cli(["--params", str(params), "--root", str(root), "-q"]) == 2
    err = capsys.readouterr().err
    assert _one_line(err) == "error: output folder figs is a file, not a folder; nothing was run or written"
    assert not (root / HOME).exists() or not any((root / HOME).iterdir())


@pytest.mark.slow  # the paper command in a private mount namespace with a read-only paper folder
def test_a_read_only_paper_folder_is_refused_before_any_notebook_runs(tmp_path):
    if shutil.which("unshare") is None or subprocess.run(["unshare", "-rm", "true"], capture_output=True).returncode:
        skip_or_fail_in_ci("unshare cannot make a user and mount namespace here (util-linux, unprivileged user namespaces)")
    root = _project(tmp_path)
    params = _params(root, "a", runs_dir="runs/a")
    paper = root / "paper"
    script = textwrap.dedent(f"""
        mount --bind "{paper}" "{paper}" && mount -o remount,ro,bind "{paper}" || exit 99
        exec "{sys.executable}" -m analysis_lib paper --params {params.name} --root "{root}" --no-latex -q
    """)
    proc = subprocess.run(["unshare", "-rm", "sh", "-c", script], cwd=root, env={**os.environ, "PYTHONPATH": str(ROOT)},
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2, proc.stderr
    assert _one_line(proc.stderr) == ("error: output folder paper cannot be written (Read-only file system); nothing was "
                                      "run or written")
    assert not (root / HOME / OUTPUT_MANIFEST).exists() and not (root / HOME / STAGING_DIR).exists()
