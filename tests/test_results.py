"""`python -m analysis_lib results`: RESULTS.md from simulated benchmark runs with known injected effects."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from analysis_lib.cli.results import cli, evaluation_table, write_results
from analysis_lib.simulate.full_run import write_full_run
from analysis_lib.simulate.model import Effects
from analysis_lib.simulate.runs import simulate_runs
from analysis_lib.study import plan as P

ROOT = Path(__file__).resolve().parents[1]
PLAN = ROOT / "params" / "analysis_plan.yaml"


def _rows(text: str, metric: str) -> list[list[str]]:
    """Cells of the report's table rows for a metric id (first cell: "label, `id`"), in the planned tiers
    (the estimands beside intention to treat, at the end, have tables of their own)."""
    text = text.split("\n## Beside intention to treat", 1)[0]
    return [[c.strip() for c in line.strip("|").split("|")] for line in text.splitlines()
            if line.startswith("| ") and line.split("|")[1].strip().endswith(f"`{metric}`")]


@pytest.fixture(scope="module")
def effect_run(tmp_path_factory) -> Path:
    """12 tasks x 2 runs x 3 conditions with the simulator's default effects (codecanvas: -30 % tokens, +12 points)
    and no infrastructure error, so that every trial has its verdict."""
    root = tmp_path_factory.mktemp("effects")
    simulate_runs(root / "runs", seed=3, n_tasks=12, repetitions=2, effects=Effects(n_infra_errors=0))
    return write_full_run(root / "runs", root / "results" / "full_run.json")


def test_results_report_reads_as_a_preregistered_report(effect_run, tmp_path):
    out = tmp_path / "RESULTS.md"
    res = write_results(effect_run, out, tmp_path / "plots", plan_path=PLAN, record=False)
    assert res.exit_code == 0 and not res.refused and res.missing.empty
    text = out.read_text()
    assert text.startswith("> **SIMULATED DATA.**") and "# Results: simulated-ab (SIMULATED)" in text
    assert f"sha256 `{P.plan_hash(P.load_plan(PLAN))}`" in text.split("\n## ", 1)[0]
    order = [text.index(h) for h in ("## Evaluation completeness", "## Design", "## Primary metrics (pre-registered tests, Holm",
                                     "## Secondary metrics (pre-registered tests, Benjamini-Hochberg",
                                     "## Exploratory metrics (descriptive: estimates and intervals, no test)", "## Environment lock",
                                     "## Spend against the budget")]
    assert order == sorted(order)
    # The injected token reduction of codecanvas is found, in the right direction, after Holm.
    tokens = {r[1]: r for r in _rows(text, "total_tokens")}
    assert tokens["codecanvas vs text"][-1] == "**yes**" and tokens["codecanvas vs text"][6].startswith("\u2212")
    # Exploratory: intervals, no p-values; the MCP tools of each condition are described per tool.
    expl = text.split("## Exploratory", 1)[1].split("## Environment lock", 1)[0]
    assert "p (" not in expl and "significant" not in expl.lower().replace("nothing here is a confirmed", "")
    assert "`mcp_calls__codecanvas__canvas`" in expl and "`time_to_first_edit_sec`" in expl
    assert "schedule seed **3**" in text and "| spent | " in text and "| phase budget | 100.00 USD |" in text
    assert "`claude-sonnet-4-5-20250929`" in text.split("## Environment lock", 1)[1]
    pngs = sorted(p.name for p in (tmp_path / "plots").iterdir())
    assert pngs == ["exploratory.png", "primary_effects.png", "secondary_effects.png"]
    assert all((tmp_path / "plots" / p).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" for p in pngs)
    assert text.count("Simulated data: not a finding.") == 3
    assert str(tmp_path) not in text and str(ROOT) not in text  # no machine path


def test_null_simulation_finds_no_effect(tmp_path):
    simulate_runs(tmp_path / "runs", seed=8, n_tasks=12, repetitions=2, effects=Effects.null(n_infra_errors=0))
    full = write_full_run(tmp_path / "runs")  # beside the runs, as the runner writes it
    out = tmp_path / "RESULTS.md"
    res = write_results(full, out, plan_path=PLAN, record=False)
    formal = res.table[res.table["tier"] != "exploratory"]
    assert res.exit_code == 0 and formal["p_value"].notna().all()
    assert not formal["significant"].any(), formal[["metric", "profile_b", "p_value", "p_adjusted"]]
    assert "**yes**" not in out.read_text()


@pytest.mark.slow  # the results command as a real subprocess: ~3 s
def test_missing_evaluations_refuse_accuracy_but_write_the_rest(tmp_path):
    simulate_runs(tmp_path / "runs", seed=3, n_tasks=6, repetitions=2)  # one infrastructure error: no verdict
    full = write_full_run(tmp_path / "runs", missing=2)
    ev = evaluation_table(json.loads(full.read_text()))
    assert int(ev["verdict"].isna().sum()) == 3
    proc = subprocess.run([sys.executable, "-m", "analysis_lib", "results", str(full), "--output", str(tmp_path / "R.md"),
                           "--no-record"], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert proc.returncode == 1, proc.stderr
    assert "error: accuracy analysis refused: 3 of 36 scheduled trials have no pass/fail verdict" in proc.stderr
    assert proc.stderr.count("  ") >= 3 and "not_evaluated" in proc.stderr and "evaluation_error" in proc.stderr
    text = (tmp_path / "R.md").read_text()
    assert "**3 of 36 scheduled trials have no pass/fail verdict from their evaluator:**" in text
    assert "> **Accuracy analysis refused:**" in text
    missing = text.split("## Evaluation completeness", 1)[1].split("## Design", 1)[0]
    for r in ev[ev["verdict"].isna()].itertuples():
        assert f"| {r.condition} | {r.task_id} | {r.run} |" in missing
    assert _rows(text, "success") and all("refused: evaluations missing" in " ".join(r) for r in _rows(text, "success"))
    assert all(r[9] != "–" for r in _rows(text, "total_tokens"))  # non-outcome metrics still tested


def test_changed_plan_is_flagged_with_its_diff_in_the_first_lines(effect_run, tmp_path):
    runs = tmp_path / "runs"
    shutil.copytree(effect_run.parent.parent / "runs", runs)
    full = write_full_run(runs)
    before = {p: p.read_bytes() for p in runs.rglob("*") if p.is_file()}
    assert cli([str(full), "--output", str(tmp_path / "first.md"), "--plan", str(PLAN)]) == 0
    assert {p: p.read_bytes() for p in runs.rglob("*") if p.is_file()} == before  # the runs are read-only input
    first = (tmp_path / "first.md").read_text()
    assert "plan changed" not in first and "it is a pre-registration" in first
    d = yaml.safe_load(PLAN.read_text())
    d["tiers"]["primary"]["metrics"] = d["tiers"]["primary"]["metrics"][1:]  # resolve rate dropped after looking
    changed = tmp_path / "changed.yaml"
    changed.write_text(yaml.safe_dump(d))
    assert cli([str(full), "--output", str(tmp_path / "second.md"), "--plan", str(changed)]) == 0
    head = (tmp_path / "second.md").read_text().splitlines()[:30]
    assert head[0].startswith("> **SIMULATED DATA.**")
    assert head[2].startswith("> **plan changed after the plan record:** the plan recorded in the run record")
    diff = "\n".join(head[head.index("```diff"):])
    assert "-    - id: success\n-      test: mcnemar_exact" in diff


def test_bad_inputs_give_one_clear_line(tmp_path, capsys):
    bad_plan = tmp_path / "plan.yaml"
    bad_plan.write_text(PLAN.read_text().replace("alpha: 0.05", "alpha: 0.05\nalfa: 0.01"))
    dry = tmp_path / "dry.json"
    dry.write_text(json.dumps({"kind": "bench_plan", "dry_run": True, "schedule": []}))
    assert cli([str(dry), "--output", str(tmp_path / "R.md"), "--plan", str(bad_plan)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and err.endswith("plan.yaml: invalid analysis plan: alfa: unknown key")
    assert cli([str(dry), "--output", str(tmp_path / "R.md"), "--plan", str(PLAN)]) == 2
    assert "dry.json: a dry run's plan has no trials" in capsys.readouterr().err
    (tmp_path / "broken.json").write_text('{"trials": [')
    assert cli([str(tmp_path / "broken.json"), "--plan", str(PLAN)]) == 2
    assert "broken.json" in capsys.readouterr().err
    lonely = tmp_path / "lonely.json"
    lonely.write_text(json.dumps({"trials": [], "manifest": {"name": "nowhere"}}))
    assert cli([str(lonely), "--plan", str(PLAN)]) == 2
    assert "runs folder not found" in capsys.readouterr().err and not (tmp_path / "R.md").exists()


def test_simulate_cli_writes_a_full_run_that_results_reads(tmp_path):
    from analysis_lib.simulate import cli as sim

    full = tmp_path / "results" / "full_run.json"
    assert sim.cli(["--seed", "2", "--out", str(tmp_path / "runs"), "--tasks", "4", "--repetitions", "1",
                    "--infra-errors", "0", "--full-run", str(full)]) == 0
    obj = json.loads(full.read_text())
    assert obj["simulated"] is True and obj["runs_dir"] == "../runs" and obj["seed"] == 2
    assert len(obj["trials"]) == 12 and all(t["outcome"] in ("passed", "failed") for t in obj["trials"])
    assert "--infra-errors 0" in (tmp_path / "runs" / "README.md").read_text()
    (tmp_path / "runs" / P.LOCK_NAME).unlink()  # runs without a pre-registration
    assert cli([str(full), "--output", str(tmp_path / "R.md"), "--no-record", "--plan", str(PLAN)]) == 0
    assert not (tmp_path / P.LOCK_NAME).exists() and not (tmp_path / "runs" / P.LOCK_NAME).exists()  # --no-record
    assert cli([str(full), "--output", str(tmp_path / "R.md"), "--plan", str(PLAN)]) == 0
    assert (tmp_path / P.LOCK_NAME).exists() and not (tmp_path / "runs" / P.LOCK_NAME).exists()
    assert "it is not a pre-registration" in (tmp_path / "R.md").read_text()


@pytest.mark.slow  # a full run of scripted agents as real processes: ~6 s
def test_real_runner_output_with_scripted_agents(tmp_path, monkeypatch, capsys):
    """The runner's own full_run.json (scripted claude, real subprocesses): found, checked, reported, not simulated."""
    from bench_support import manifest_obj, setup_bench, write_manifest

    from analysis_lib.bench import environment as bench_env
    from analysis_lib.bench.runner import run_full

    b = setup_bench(tmp_path)
    for k, v in b["env"].items():
        monkeypatch.setenv(k, v)
    monkeypatch.setattr(bench_env, "_version_cache", {})
    monkeypatch.chdir(tmp_path)
    m = write_manifest(b, manifest_obj(b, {"fix-a": "solved", "fix-b": "fail", "fix-c": "garbage"}))
    run_full(m, 1, 4, 50.0, output=tmp_path / "results" / "full_run.json", runs_dir=tmp_path / "runs", quiet=True)
    # The copy at --output names the runs folder relative to itself: found without --runs-dir.
    assert json.loads((tmp_path / "results" / "full_run.json").read_text())["runs_dir"] == "../runs"
    assert cli(["results/full_run.json", "--output", "R.md", "--plan", str(PLAN)]) == 1
    err = capsys.readouterr().err
    assert "accuracy analysis refused: 2 of 6 scheduled trials" in err and "fix-c / run 1: evaluation_error" in err
    text = (tmp_path / "R.md").read_text()
    assert "SIMULATED" not in text and "schedule seed **4**" in text and "| phase budget | 50.00 USD |" in text
    assert "`claude-test-model-20260101`" in text and "| spent | 1.50 USD (3.0 % of the budget) |" in text
    # The runner's own copy inside the runs folder is found without --runs-dir, and the plan was recorded once.
    assert cli(["runs/full_run.json", "--output", "R2.md", "--plan", str(PLAN)]) == 1
    assert (tmp_path / "R2.md").read_text() == text.replace("`results/full_run.json`", "`runs/full_run.json`")
    assert json.loads((tmp_path / "runs" / P.LOCK_NAME).read_text())["analysis_plan_sha256"] == P.plan_hash(P.load_plan(PLAN))


def test_fixed_sequence_and_repository_subgroups_appear_as_declared(effect_run, tmp_path):
    from analysis_lib.cli.results import manifest_task_groups

    out = tmp_path / "RESULTS.md"
    plan = PLAN.parent / "analysis_plan_all_repetitions.yaml"
    assert write_results(effect_run, out, plan_path=plan, record=False).exit_code == 0
    text = out.read_text()
    seq = text[text.index("## Fixed-sequence hypotheses"):text.index("## Subgroups by repository")]
    rows = [r for r in seq.splitlines() if r.startswith("| codecanvas vs text |")]
    assert [r.split(" | ")[1] for r in rows] == ["1", "2"] and "noninferior (margin 5.0 pp)" in rows[0]
    assert "97.5 %" in rows[0]  # two pairs: each sequence at alpha / 2
    if "not shown" in rows[0]:
        assert "not tested" in rows[1]
    groups = manifest_task_groups(json.loads(effect_run.read_text()))
    assert groups is not None and groups.nunique() >= 2
    sub = text[text.index("## Subgroups by repository"):]
    assert all(f"| {g} |" in sub for g in groups.unique()) and "p =" not in sub  # described, not tested


def test_results_carry_the_sensitivity_tier_under_the_comparison_reports_titles(effect_run, tmp_path):
    """RESULTS.md shows every tier the comparison report shows, under the same titles, sensitivity included."""
    from analysis_lib.report.comparison_report import tier_title

    plan_path = ROOT / "params" / "analysis_plan_all_repetitions.yaml"
    out = tmp_path / "RESULTS.md"
    write_results(effect_run, out, tmp_path / "plots", plan_path=plan_path, record=False)
    text = out.read_text()
    plan = P.load_plan(plan_path)
    titles = [tier_title(t, getattr(plan.tiers, t).correction, plan.claim)
              for t in ("primary", "secondary", "exploratory", "sensitivity")]
    headings = [line[3:] for line in text.splitlines() if line.startswith("## ")]
    assert [h for h in headings if h in titles] == titles
    sens = text.split(f"## {titles[-1]}", 1)[1].split("\n## ", 1)[0]
    assert "(repetitions: majority)" in sens or "(repetitions: all)" in sens
