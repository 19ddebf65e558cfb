"""A study with configurations (the study file's ``configurations``): trials placed in a configuration and an arm,
tasks paired within a configuration, the design audit per configuration, each configuration's comparisons, the
primary effects pooled across configurations, and what the reports and the explorer show of them.

References: the SkillsBench fixtures' ``expected.json`` (stdlib + scipy, no project code: per-arm counts, the paired
t interval, McNemar's discordant counts and the DerSimonian-Laird figures), statsmodels' ``combine_effects``, and
the procedures of ``analysis_lib.stats.meta`` that ``tests/test_meta.py`` checks against metafor.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from statsmodels.stats.meta_analysis import combine_effects

from analysis_lib import analyse
from analysis_lib.core import outputs as files
from analysis_lib.inference.analysis import analyse_comparisons
from analysis_lib.inference.pooling import PI_NOTE
from analysis_lib.report import explore, figures
from analysis_lib.report.configurations import pooling_markdown, read_pooling
from analysis_lib.stats import meta
from analysis_lib.study.study import Study, open_study, study_of_trials
from analysis_lib.study.study_file import DesignError, load_design, parse_design

ROOT = Path(__file__).resolve().parents[1]
SKILLS = ROOT / "params" / "studies" / "skillsbench.yaml"
REGISTRY = ROOT / "params" / "studies" / "skillsbench-registry.yaml"
PLAN_ALL = ROOT / "params" / "analysis_plan_all_repetitions.yaml"
CONFIG = "claude-code + minimax/MiniMax-M2.1"
ARM = {"no_skills": "no_skills", "with_skills": "with_skills"}  # expected.json's arm names are the study file's


# --------------------------------------------------------------------------- the study file


def _design(**extra):
    return {"name": "s", "baseline": "a", "arms": {"a": {"paths": ["*/a/**"]}, "b": {"paths": ["*/b/**"]}}, **extra}


@pytest.mark.parametrize("change, says", [
    (lambda d: {**d, "arms": {**d["arms"], "c": {"paths": ["*/c/**"]}}}, "configurations: a study with configurations "
     "declares two arms"),
    (lambda d: {k: v for k, v in d.items() if k != "baseline"}, "configurations: .* and no baseline"),
    (lambda d: {**d, "configurations": {"folder": 2, "fields": ["agent.name"]}}, "configurations: give exactly one of"),
    (lambda d: {**d, "configurations": {}}, "configurations: give exactly one of"),
    (lambda d: {**d, "configurations": {"paths": {"x": ["/abs/**"]}}}, "configurations: .*path glob"),
    (lambda d: {**d, "configurations": {"folder": 2, "extra": 1}}, "configurations.extra: unknown key"),
])
def test_a_study_file_that_cannot_form_configurations_is_refused_in_one_line(change, says):
    base = _design(configurations={"folder": 2})
    with pytest.raises(DesignError, match=f"^study.yaml: {says}") as err:
        parse_design(change(base), "study.yaml")
    assert "\n" not in str(err.value)


def test_a_study_file_without_configurations_keeps_its_hash():
    """The hash recorded with a study's outputs does not move because the study file format grew a key: the value
    is what the code before configurations existed computed for this file (commit 0729135)."""
    design = load_design(ROOT / "params" / "studies" / "codescalebench.yaml")
    assert design.configurations is None and design.treatment_arm is None
    # The study file as it was then, before it gained the title, treatment and control the paper prints.
    then = {k: v for k, v in design.model_dump(mode="json").items() if k not in ("title", "treatment", "control")}
    assert parse_design(then).sha256() == "f43057c590c38857311f322b731c92b15f6da9a7a8281a41d5edd22bb8aa144e"
    with_rule = parse_design(_design(configurations={"folder": 2}))
    assert with_rule.sha256() != parse_design(_design()).sha256() and with_rule.treatment_arm == "b"


# --------------------------------------------------------------------------- SkillsBench's Harbor trials


@pytest.fixture(scope="module")
def skills_study(skillsbench):
    return open_study(skillsbench, SKILLS, PLAN_ALL, workers=1)


@pytest.fixture(scope="module")
def skills_expected(skillsbench):
    return json.loads((skillsbench / "expected.json").read_text())


@pytest.mark.real_fixtures
def test_skillsbench_trials_split_into_their_arms_within_the_configuration(skills_study, skills_expected):
    """expected.json: per arm the trials, passes (reward 1), mean reward with the unscored trial as 0, and the
    unscored trial; per arm and task the trials. The arm is only in the folder path."""
    m = skills_study.metrics
    assert skills_study.configurations == [CONFIG] and skills_study.baseline.name == "no_skills"
    assert skills_study.pairs() == [(f"{CONFIG} / no_skills", f"{CONFIG} / with_skills")]
    assert set(m["profile"]) == {f"{CONFIG} / no_skills", f"{CONFIG} / with_skills"}
    for arm, grp in m.groupby("arm"):
        want = skills_expected["arms"][ARM[arm]]
        assert len(grp) == want["trials"] and int((grp["success"] == True).sum()) == want["passes"]  # noqa: E712
        assert grp["reward"].fillna(0).mean() == pytest.approx(want["mean_reward_exceptions_as_zero"], rel=1e-12)
        assert int(grp["infra_error"].sum()) == want["unscored_trials"]
        cells = skills_expected["task_cells"][ARM[arm]]
        assert grp.groupby("task_id").size().to_dict() == {t: c["trials"] for t, c in cells.items()}


@pytest.mark.real_fixtures
def test_skillsbench_tasks_pair_within_the_configuration_and_equal_expected(skills_study, skills_expected):
    """The planned pass@1 difference is expected.json's mean paired difference with its paired t interval (the
    unscored trial leaves its task's pass proportion at 0 either way); McNemar on majority verdicts: b = c = 0."""
    analysis = analyse_comparisons(skills_study)
    comp = analysis.comparisons
    assert (comp["configuration"] == CONFIG).all()
    ref = skills_expected["paired_summary"]
    row = comp[(comp["tier"] == "primary") & (comp["metric"] == "success")].iloc[0]
    assert row["n_pairs"] == ref["n_pairs"] == 6
    assert row["estimate"] == pytest.approx(ref["diff_pass_proportion"]["mean"], rel=1e-12)
    assert [row["ci_low"], row["ci_high"]] == pytest.approx(ref["diff_pass_proportion"]["ci95"], rel=1e-9)
    mcnemar = comp[(comp["tier"] == "sensitivity") & comp["test"].str.startswith("McNemar")].iloc[0]
    assert (mcnemar["n_a_only"], mcnemar["n_b_only"], mcnemar["p_value"]) == (ref["mcnemar_b"], ref["mcnemar_c"],
                                                                              ref["mcnemar_exact_p"])
    assert analysis.pooling is not None and not analysis.pooling.pooled
    assert analysis.pooling.not_pooled["success"] == f"one configuration ({CONFIG}): nothing to pool across configurations"


@pytest.mark.real_fixtures
def test_skillsbench_audit_is_per_configuration_and_names_its_threats(skills_study):
    audit = skills_study.audit
    row = audit.configurations.iloc[0]
    assert (row["configuration"], row["n_trials_control"], row["n_trials_treatment"], row["n_pairs_complete"],
            row["n_pairs_incomplete"], row["n_infra_errors_control"], row["n_infra_errors_treatment"]) == (
        CONFIG, 13, 12, 6, 0, 1, 0)
    assert (row["time_limits_control"], row["time_limits_treatment"]) == ("5400 s ×2", "3600 s ×2")
    assert pd.isna(row["uptake_source"]) and pd.isna(row["uptake_share"])  # the source records no skills use
    found = {f.check: f for f in audit.findings}
    assert found["time_limits"].severity == "warning" and "no_skills: 5400 s ×2; with_skills: 3600 s ×2" in \
        found["time_limits"].message
    assert "timeout_multiplier (no_skills: 2.0 ×13; with_skills: 2.0 ×6, 4.0 ×6)" in found["settings"].message
    assert found["infrastructure"].message.startswith(f"{CONFIG}: infrastructure errors per arm: no_skills 1 of 13")
    assert found["time"].message.startswith(f"{CONFIG}: with_skills ran 2.3 days before no_skills")
    assert list(audit.arms["configuration"]) == [CONFIG, CONFIG]
    assert list(audit.baseline_column()) == [True, False]  # the control arm of its configuration
    assert all(f.message.startswith(CONFIG) for f in audit.findings if f.check not in ("configurations",))


@pytest.mark.real_fixtures
def test_the_study_file_names_the_arm_folder_nothing_is_guessed(skillsbench, tmp_path):
    """A contributor who names the folder ``noskills/``: the study file lists it and the trials land in their arm;
    a study file that does not list it has an arm that selects no trial, and stops in one line naming it."""
    runs = tmp_path / "runs"
    shutil.copytree(skillsbench, runs)
    (runs / "minimax-m2.1+claude-code" / "no_skills").rename(runs / "minimax-m2.1+claude-code" / "noskills")
    study = open_study(runs, SKILLS, PLAN_ALL, workers=1)
    assert study.metrics.groupby("arm").size().to_dict() == {"no_skills": 13, "with_skills": 12}
    strict = load_design(SKILLS).model_dump(mode="json")
    strict["arms"]["no_skills"]["paths"] = ["*/no_skills/**"]
    # Its no_skills arm then selects no trial: a study file that cannot work stops in one line, naming the arm.
    with pytest.raises(DesignError, match=r"arms.no_skills: its selector \(path \*/no_skills/\*\*\) matches none"):
        open_study(runs, parse_design(strict), PLAN_ALL, workers=1)


@pytest.mark.real_fixtures
def test_a_saved_study_keeps_its_configurations(skills_study, tmp_path):
    skills_study.save(tmp_path)
    loaded = Study.load(tmp_path)
    assert loaded.configurations == [CONFIG] and loaded.pairs() == skills_study.pairs()
    as_read = lambda f: f.astype(object).where(f.notna(), None)  # noqa: E731  (a CSV keeps no None apart from NaN)
    pd.testing.assert_frame_equal(as_read(loaded.audit.configurations), as_read(skills_study.audit.configurations),
                                  check_dtype=False)
    written = pd.read_csv(tmp_path / files.DESIGN_AUDIT)
    assert list(written.columns[:3]) == ["configuration", "arm", "baseline"] and written["baseline"].tolist() == [True, False]
    assert loaded.audit.baselines == [f"{CONFIG} / no_skills"]


@pytest.mark.real_fixtures
def test_a_study_without_configurations_is_analysed_as_before(codescalebench, tmp_path):
    """CodeScaleBench's study file declares none: no configuration column, one baseline, nothing pooled or written."""
    from analysis_lib import write_comparisons

    study = analyse(codescalebench, tmp_path, design=ROOT / "params" / "studies" / "codescalebench.yaml", workers=1,
                    cache=False)
    assert "configuration" not in study.metrics and study.configurations == [] and study.configuration_pairs() == {}
    assert study.pairs() == [("baseline", "mcp")] and study.audit.configurations is None
    (tmp_path / files.POOLED).write_text("stale")  # an earlier analysis' table must not outlive it
    analysis = write_comparisons(study, tmp_path)
    assert analysis.pooling is None and "configuration" not in analysis.comparisons
    assert not (tmp_path / files.POOLED).exists() and not (tmp_path / files.DESIGN_CONFIGURATIONS).exists()


# --------------------------------------------------------------------------- SkillsBench's results registry


@pytest.fixture(scope="module")
def registry(skillsbench_registry, tmp_path_factory):
    from analysis_lib import write_comparisons

    out = tmp_path_factory.mktemp("registry")
    study = analyse(skillsbench_registry, out, design=REGISTRY, plan=PLAN_ALL, workers=1, cache=False)
    return study, write_comparisons(study, out), out


@pytest.fixture(scope="module")
def registry_expected(skillsbench_registry):
    return json.loads((skillsbench_registry / "expected.json").read_text())


@pytest.mark.real_fixtures
def test_registry_per_configuration_differences_and_mcnemar_counts_equal_expected(registry, registry_expected):
    study, analysis, out = registry
    comp = pd.read_csv(out / files.COMPARISONS)
    assert len(study.configurations) == 6 and study.baseline.name == "no_skills"
    for ref in registry_expected["per_config"]:
        mine = comp[comp["configuration"] == ref["model"]]
        row = mine[(mine["tier"] == "primary") & (mine["metric"] == "success")].iloc[0]
        assert (row["profile_a"], row["profile_b"]) == (f"{ref['model']} / no_skills", f"{ref['model']} / with_skills")
        assert row["n_pairs"] == ref["n_tasks"] == 87
        assert row["estimate"] == pytest.approx(ref["mean_difference"], rel=1e-12)
        assert [row["ci_low"], row["ci_high"]] == pytest.approx(ref["paired_t_ci95"], rel=1e-9)
        assert row["p_value"] == pytest.approx(ref["paired_t_p"], rel=1e-6)
        mc = mine[(mine["tier"] == "sensitivity") & mine["test"].str.startswith("McNemar")].iloc[0]
        assert (mc["n_a_only"], mc["n_b_only"]) == (ref["mcnemar_b"], ref["mcnemar_c"]), ref["model"]
        assert mc["p_value"] == pytest.approx(ref["mcnemar_exact_p"], rel=1e-10)
        trials = study.metrics[study.metrics["configuration"] == ref["model"]]
        for arm, key in (("no_skills", "no_skills"), ("with_skills", "with_skills")):
            sub = trials[trials["arm"] == arm]
            assert (len(sub), int(sub["success"].sum())) == (ref[key]["trials"], ref[key]["passes"])
    moderators = pd.read_csv(out / files.DESIGN_CONFIGURATIONS).set_index("configuration")
    assert moderators.loc["Codex (GPT-5.5)", "harness"] == "Codex" and moderators.loc["OpenHands (Kimi K2.6)", "family"] == "moonshot"


@pytest.mark.real_fixtures
def test_registry_pooled_numbers_written_equal_expected_and_statsmodels(registry, registry_expected):
    _, _, out = registry
    tables = read_pooling(out)
    assert tables is not None and tables.metrics() == ["success"]
    rows = tables.rows("success")
    ref = registry_expected["random_effects"]  # DerSimonian-Laird, stdlib + scipy
    dl = rows.loc["comparison"]
    assert (dl["k"], dl["estimate"], dl["se"], dl["tau2"], dl["I2"], dl["Q"], dl["Q_p"]) == (
        ref["k"], pytest.approx(ref["mu"], rel=1e-10), pytest.approx(ref["se"], rel=1e-10),
        pytest.approx(ref["tau2"], rel=1e-8), pytest.approx(ref["I2"], rel=1e-10), pytest.approx(ref["Q"], rel=1e-10),
        pytest.approx(ref["Q_p"], rel=1e-8))
    assert [dl["ci_low"], dl["ci_high"]] == pytest.approx(ref["ci95"], rel=1e-10)
    # expected.json's prediction interval is the plug-in Higgins-Thompson-Spiegelhalter one, kept beside the bootstrap.
    assert [dl["pi_hts_low"], dl["pi_hts_high"]] == pytest.approx(ref["prediction_interval95"], rel=1e-9)
    # The entries pooled are expected.json's per-configuration differences and standard errors (paired t: exact).
    entries = tables.effects.set_index("configuration")
    y = np.array([c["mean_difference"] for c in registry_expected["per_config"]])
    v = np.array([c["se_difference"] ** 2 for c in registry_expected["per_config"]])
    names = [c["model"] for c in registry_expected["per_config"]]
    assert entries.loc[names, "y"].tolist() == pytest.approx(y.tolist(), rel=1e-12)
    assert entries.loc[names, "se"].tolist() == pytest.approx(np.sqrt(v).tolist(), rel=1e-9)
    assert entries["weight"].sum() == pytest.approx(100.0)
    # statsmodels: combine_effects(y, v, method_re="pm", use_t=True); its 4th interval is the HKSJ one.
    pm_ref = combine_effects(y, v, method_re="pm", use_t=True)
    pm = rows.loc["sensitivity"]
    assert (pm["estimate"], pm["tau2"]) == (pytest.approx(pm_ref.mean_effect_re, rel=1e-9), pytest.approx(pm_ref.tau2, rel=1e-6))
    assert [pm["ci_low"], pm["ci_high"]] == pytest.approx(list(pm_ref.conf_int(use_t=True)[3]), rel=1e-7)
    # REML with HKSJ: stats.meta, checked against metafor's documented results in tests/test_meta.py.
    reml = meta.random_effects(y, v).iloc[0]
    p = rows.loc["primary"]
    assert (p["estimate"], p["ci_low"], p["ci_high"], p["pi_hts_low"], p["pi_hts_high"]) == pytest.approx(
        (reml["estimate"], reml["ci_low"], reml["ci_high"], reml["pi_hts_low"], reml["pi_hts_high"]), rel=1e-9)
    # The reported prediction interval: the parametric bootstrap with the seed and draws the row records.
    boot = meta.prediction_interval(y, v, draws=int(p["pi_draws"]), seed=int(p["pi_seed"])).iloc[0]
    assert (p["pi_low"], p["pi_high"]) == pytest.approx((boot["pi_low"], boot["pi_high"]), rel=1e-12)
    assert (dl["pi_low"], dl["pi_high"]) == (p["pi_low"], p["pi_high"])  # one interval for all three rows
    assert p["df"] == 5 and p["prediction_note"] == PI_NOTE and bool(p["simulated"]) is False
    assert p["regression_note"] == "no meta-regression: it needs at least 10 configurations, 6 have an estimate"
    assert not (out / files.META_REGRESSION).exists()
    not_pooled = tables.pooled[tables.pooled["role"] == "not pooled"].set_index("metric")["note"]
    assert not_pooled["total_tokens"].startswith("cannot pool total_tokens: pooling needs at least 2 configurations")


@pytest.mark.real_fixtures
def test_registry_report_quotes_the_pooled_numbers_with_the_prediction_note(registry):
    _, analysis, out = registry
    report = (out / files.COMPARISON_REPORT).read_text()
    section = report[report.index("## Per configuration, and pooled across configurations"):]
    assert "| **pooled, REML, HKSJ** | 6 configurations |  |  | +16.0 pp [+9.7, +22.2] | 0.001 |" in section
    assert "| pooled, DerSimonian-Laird, normal | 6 configurations |  |  | +16.0 pp [+11.0, +20.9] | < 0.001 |" in section
    assert "| 95% prediction interval (a new configuration) |  |  |  | [+0.8, +30.2] pp |" in section
    assert "I² = 52 % [0, 81], Cochran's Q = 10.52 on 5 df (p = 0.062)" in section and PI_NOTE in section
    assert "No configuration has an estimate (no task with values under both profiles" in section  # tokens
    # The comparisons' forest names each row by its configuration (the treatment is the same in every one).
    labels = figures.forest_rows(analysis.comparisons)["label"]
    assert "pass@1 (mean of per-task pass rates): OpenHands (Grok 4.3)" in set(labels) and not labels.str.contains(" / ").any()
    # Read back from the CSVs, the pooling renders as the analysis wrote it from memory.
    assert "\n".join(pooling_markdown(analysis.comparisons, read_pooling(out))) in report


@pytest.mark.real_fixtures
def test_the_command_line_prints_each_pooled_metric_in_one_line(skillsbench_registry, run_cli, tmp_path):
    run = run_cli(skillsbench_registry, "--study", REGISTRY, "--plan", PLAN_ALL, "--no-llm", "--no-cache", "-o", tmp_path)
    assert run.returncode == 0, run.stderr
    assert ("pass@1 (mean of per-task pass rates) pooled over 6 configurations: +16.0 pp [+9.7, +22.2] (REML, HKSJ t on "
            "5 df, p = 0.001); I² = 52 %, Q = 10.52 (p = 0.062); 95% prediction interval [+0.8, +30.2] pp") in run.stdout
    assert (tmp_path / files.POOLED).exists() and (tmp_path / files.DESIGN_CONFIGURATIONS).exists()


# --------------------------------------------------------------------------- moderators (simulated)


def _simulated_registry(path: Path, k: int, seed: int) -> dict[str, float]:
    """SkillsBench's registry format, SIMULATED: k configurations (half harness H1, half H2) x 60 tasks x 2 arms x
    4 trials; task difficulty shared by the arms, the treatment adds 0.05 under H1 and 0.25 under H2 (the
    meta-regression's minimum is 10 configurations)."""
    rng = np.random.default_rng(seed)
    effect = {"H1": 0.05, "H2": 0.25}
    records = []
    for c in range(k):
        harness = "H1" if c % 2 == 0 else "H2"
        base = rng.uniform(0.15, 0.45, 60)
        for t, p0 in enumerate(base):
            for condition, p in (("No Skills", p0), ("With Skills", min(p0 + effect[harness], 0.99))):
                passes = int(rng.binomial(4, p))
                records.append({"task": f"task-{t:02d}", "model": f"Agent {c:02d}", "modelShort": f"M{c:02d}",
                                "harness": harness, "family": "sim", "condition": condition, "score": 100 * passes / 4,
                                "trials": 4, "passCount": passes, "perfectCount": passes})
    path.write_text(json.dumps(records))
    return effect


def test_with_ten_configurations_and_declared_moderators_the_meta_regression_runs(tmp_path):
    runs = tmp_path / "runs"
    runs.mkdir()
    effect = _simulated_registry(runs / "results-registry.json", 10, seed=7)
    plan = tmp_path / "plan.yaml"  # the all-repetitions plan's primary test, without its slower sensitivity rows
    plan.write_text("""name: pass-at-1
alpha: 0.05
pairing: {unit: task, repetitions: all, exclude_infra_errors: true}
bootstrap: {n_resamples: 500, confidence: 0.95, seed: 0, method: percentile}
tiers:
  primary: {correction: holm, metrics: [{id: success, test: paired_t}]}
  secondary: {correction: fdr_bh, metrics: [{id: total_tokens, test: wilcoxon_signed_rank}]}
  exploratory: {correction: none, metrics: [{id: duplicate_reads, test: descriptive}]}
beside_itt: {compliance: false, infrastructure_bounds: false, divergence: false}
""")
    design = load_design(REGISTRY).model_dump(mode="json", exclude_none=True)
    design.update(simulated=True, success="reward == 1")
    design.pop("source")
    design["configurations"]["moderators"] = {"harness": "harness"}
    out = tmp_path / "out"
    from analysis_lib import write_comparisons

    study = analyse(runs, out, design=parse_design(design), plan=plan, workers=1, cache=False)
    analysis = write_comparisons(study, out)
    assert len(study.configurations) == 10 and study.simulated
    (pooled,) = analysis.pooling.pooled
    reg = pd.read_csv(out / files.META_REGRESSION)
    term = reg.set_index("term").loc["harness=H2"]
    # The moderator came from each configuration's records; the regression is stats.meta's on the pooled entries.
    entries = pd.read_csv(out / files.POOLED_CONFIGURATIONS)
    x = (entries["configuration"].str[-2:].astype(int) % 2 == 1).astype(float).to_numpy()
    ref = meta.meta_regression(entries["y"].to_numpy(), entries["se"].to_numpy() ** 2, x, ["harness=H2"])
    assert term["estimate"] == pytest.approx(ref.coefficients.set_index("term").loc["harness=H2", "estimate"], rel=1e-9)
    # The simulated difference between harnesses (0.20, less where p0 + 0.25 is capped) lies in its interval.
    assert term["ci_low"] < effect["H2"] - effect["H1"] < term["ci_high"] and term["p_val"] < 0.01
    assert reg["simulated"].all() and reg["note"].str.startswith("exploratory").all()
    assert pooled.regression is not None and pooled.regression.r2 > 0.5
    written = pd.read_csv(out / files.POOLED)
    assert written["simulated"].all()


# --------------------------------------------------------------------------- the explorer


@pytest.mark.real_fixtures
@pytest.mark.slow  # loads the registry's 3,132 trials whole, as the explorer notebook does (about 12 s)
def test_the_explorer_picks_a_configuration_before_a_and_b(skillsbench_registry):
    study, trials = study_of_trials(skillsbench_registry, REGISTRY, PLAN_ALL)
    pairs = study.configuration_pairs()
    a, b = pairs["OpenHands (Grok 4.3)"]
    box = explore.pair_explorer(trials, study.metrics, False, a, b, configurations=pairs)
    dd_config, dd_a, dd_b = box.children[0].children[:3]
    assert dd_config.description == "configuration" and list(dd_config.options) == sorted(pairs)
    assert (dd_config.value, dd_a.value, dd_b.value) == ("OpenHands (Grok 4.3)", a, b)
    dd_config.value = "Codex (GPT-5.5)"
    assert tuple(dd_a.options) == pairs["Codex (GPT-5.5)"] == tuple(dd_b.options)
    assert (dd_a.value, dd_b.value) == pairs["Codex (GPT-5.5)"]
    dd_task = box.children[2].children[0]
    assert len(dd_task.options) == 87  # the tasks both arms of the chosen configuration ran
    # Without configurations the explorer has no configuration picker (A, B and the grid's sort).
    plain = explore.pair_explorer(trials, study.metrics, False, a, b)
    assert [w.description for w in plain.children[0].children] == ["A", "B", "sort grid"]


# --------------------------------------------------------------------------- the paper pipeline (papermill, real TeX)


def _project(tmp_path: Path, params_name: str, runs: Path) -> Path:
    """A copy of the project's notebooks, params and paper skeleton whose params read ``runs`` (the shared fixture)."""
    import os

    root = tmp_path / "project"
    shutil.copytree(ROOT / "notebooks", root / "notebooks", ignore=shutil.ignore_patterns(".ipynb_checkpoints"))
    shutil.copytree(ROOT / "params", root / "params")
    (root / "paper").mkdir()
    shutil.copyfile(ROOT / "paper" / "main.tex", root / "paper" / "main.tex")
    params = root / "params" / params_name
    text = params.read_text()
    old = next(line for line in text.splitlines() if line.startswith("runs_dir:"))
    params.write_text(text.replace(old, f"runs_dir: {os.path.relpath(runs, root)}"))
    return root


def _latex_or_fail_in_ci() -> bool:
    import os

    if os.environ.get("CI") == "true":
        assert shutil.which("pdflatex"), "CI=true but pdflatex is missing: .ci/run installs TeX"
    return shutil.which("pdflatex") is not None


@pytest.mark.slow  # the whole notebook pipeline with papermill and pdflatex (about a minute)
def test_the_paper_pipeline_runs_on_skillsbench(skillsbench, skills_expected, tmp_path):
    """``make paper PARAMS=params/skillsbench.yaml``: notebooks 00-05 and real TeX on the Harbor slice."""
    from analysis_lib.cli import pipeline

    root = _project(tmp_path, "skillsbench.yaml", skillsbench)
    latex = _latex_or_fail_in_ci()
    pipeline.run_pipeline(root / "params" / "skillsbench.yaml", root, quiet=True, latex=latex)
    out = root / "results" / "skillsbench"
    study = json.loads((out / "analytics" / "study.json").read_text())
    assert (study["arms"], study["baseline"]) == ([f"{CONFIG} / no_skills", f"{CONFIG} / with_skills"], "no_skills")
    comp = pd.read_csv(out / "comparisons" / "comparisons.csv")
    row = comp[(comp["tier"] == "primary") & (comp["metric"] == "success")].iloc[0]
    assert row["configuration"] == CONFIG
    assert row["estimate"] == pytest.approx(skills_expected["paired_summary"]["diff_pass_proportion"]["mean"], rel=1e-12)
    snippets = {p.name: p.read_text() for p in (out / "paper" / "snippets").glob("*.tex")}
    assert not any("SIMULATED" in text for text in snippets.values())
    assert "SkillsBench" in snippets["data.tex"] and "Results per configuration" in snippets["comparisons.tex"]
    audit = snippets["design_audit.tex"]
    assert "configuration by configuration" in audit and "5400 s $\\times$2 / 3600 s $\\times$2" in audit
    assert "time limit differs between the arms" in audit
    discussion = snippets["discussion.tex"]
    assert "\\paragraph{One configuration.}" in discussion and "Heterogeneity" not in discussion
    # The threat only the configuration shows is a limitation, not only a line of the audit.
    assert "\\paragraph{Within configurations.}" in discussion and "no\\_skills: 5400 s $\\times$2" in discussion
    markdown = (out / "paper" / "paper_snippets.md").read_text()
    assert "One configuration (" in markdown and "\\" not in markdown.split("## Quoted numbers")[0].replace("\\\\", "")
    if latex:
        assert (out / "paper" / "main.pdf").stat().st_size > 10_000


@pytest.mark.slow  # notebooks 01, 02 and 05 on 3,132 trials, with pdflatex (about a minute)
def test_the_paper_pipeline_pools_the_registry(skillsbench_registry, tmp_path):
    """``make paper PARAMS=params/skillsbench-registry.yaml``: the forest plot, the pooled numbers quoted from
    pooled.csv with the prediction interval and its note, the heterogeneity in the limitations."""
    from analysis_lib.cli import pipeline

    root = _project(tmp_path, "skillsbench-registry.yaml", skillsbench_registry)
    latex = _latex_or_fail_in_ci()
    pipeline.run_pipeline(root / "params" / "skillsbench-registry.yaml", root, quiet=True, latex=latex,
                          only=["01_metrics", "02_stats", "05_paper"])
    out = root / "results" / "skillsbench-registry"
    assert (out / "figures" / "forest_pooled_success.pdf").exists() and (out / "figures" / "forest_pooled_success.png").exists()
    snippets = {p.name: p.read_text() for p in (out / "paper" / "snippets").glob("*.tex")}
    assert "forest_pooled_success.pdf" in snippets["figures.tex"]
    macros = dict(re.findall(r"^\\newcommand\{\\(Pooled[A-Za-z]+)\}\{(.*)\}  % ", snippets["macros.tex"], re.MULTILINE))
    # The same numbers as pooled.csv, formatted once: REML + HKSJ, the prediction interval, DerSimonian-Laird.
    assert (macros["PooledSuccessEst"], macros["PooledSuccessLow"], macros["PooledSuccessHigh"]) == (
        "\\num{+16.0}\\,pp", "\\num{+9.7}\\,pp", "\\num{+22.2}\\,pp")
    # The bootstrap prediction interval (seeded); the plug-in Higgins-Thompson-Spiegelhalter one beside it in pooled.csv.
    assert (macros["PooledSuccessPILow"], macros["PooledSuccessPIHigh"]) == ("\\num{+0.8}\\,pp", "\\num{+30.2}\\,pp")
    primary = pd.read_csv(out / "comparisons" / files.POOLED).query("role == 'primary'").iloc[0]
    assert (round(100 * primary["pi_hts_low"], 1), round(100 * primary["pi_hts_high"], 1)) == (1.9, 30.0)
    assert (macros["PooledSuccessDLEst"], macros["PooledSuccessDLLow"], macros["PooledSuccessDLHigh"]) == (
        "\\num{+16.0}\\,pp", "\\num{+11.0}\\,pp", "\\num{+20.9}\\,pp")
    assert (macros["PooledSuccessK"], macros["PooledSuccessIsq"], macros["PooledSuccessQ"]) == ("6", "\\num{52}\\,\\%", "\\num{10.52}")
    results = snippets["results.tex"]
    assert "\\PooledSuccessPILow{}" in results and "covered 93 to 96\\% of new configurations" in results
    assert "\\paragraph{Heterogeneity between configurations.}" in snippets["discussion.tex"]
    assert "Within configurations" not in snippets["discussion.tex"]  # the audit warns of no threat in one
    assert "Table~\\ref{tab:comparisons}" in results and "\\label{tab:comparisons}" in snippets["comparisons.tex"]
    # primary, three sensitivity and two partial-credit rows (the registry's rewards are mean scores: partial credit)
    assert snippets["comparisons.tex"].count("\\quad OpenHands (Kimi K2.6)") == 6
    assert "mean reward (paired t)} \\\\" in snippets["comparisons.tex"]
    # Partial credit in six configurations: one sentence with the range, not one per configuration.
    assert "Paired over the" not in results and results.count("Paired within each configuration") == 1
    assert re.search(r"differed from \\texttt\{no\\_skills\} by between \\[A-Za-z]+Est\{\} \(OpenHands \(Gemini 3.5 "
                     r"Flash\)\) and \\[A-Za-z]+Est\{\} \(OpenHands \(DeepSeek V4 Pro\); paired t;", results), results
    markdown = (out / "paper" / "paper_snippets.md").read_text()
    assert "+16.0 pp (95% CI +9.7 pp to +22.2 pp" in markdown.replace("\u2212", "-") and PI_NOTE in markdown
    if latex:
        log = (out / "paper" / "main.log").read_text(errors="replace")
        assert (out / "paper" / "main.pdf").stat().st_size > 10_000 and "Undefined control sequence" not in log


@pytest.mark.real_fixtures
def test_a_configuration_missing_an_arm_is_named_and_left_out_the_rest_is_pooled(registry):
    study, _, _ = registry
    m = study.metrics
    gone = "OpenHands (Grok 4.3)"
    partial = m[~((m["configuration"] == gone) & (m["arm"] == "with_skills"))].reset_index(drop=True)
    cut = Study.from_table(partial, design=study.design, plan=study.plan)
    assert gone in cut.configurations and gone not in cut.configuration_pairs() and len(cut.pairs()) == 5
    warned = [f.message for f in cut.audit.findings if f.check == "configurations" and f.severity == "warning"]
    assert warned == [f"{gone}: no trial in with_skills; the configuration is left out of the comparisons and of the pooling"]
    analysis = analyse_comparisons(cut, beside=False)
    assert gone not in set(analysis.comparisons["configuration"])
    (pooled,) = analysis.pooling.pooled
    assert pooled.k == 5 and gone not in set(pooled.effects["label"])
    assert cut.untestable() is None  # one configuration's problem does not stop the other five


@pytest.mark.real_fixtures
def test_a_study_whose_every_configuration_lacks_an_arm_cannot_be_compared(registry):
    """The command line's and the pipeline's stop counts the study's pairs (one per configuration), not its arms."""
    study, _, _ = registry
    m = study.metrics
    keep = m["configuration"].isin(sorted(study.configurations)[:2]) & (m["arm"] == "with_skills")
    cut = Study.from_table(m[keep | ~m["configuration"].isin(sorted(study.configurations)[:2])
                             & (m["arm"] == "no_skills")].reset_index(drop=True), design=study.design, plan=study.plan)
    assert cut.pairs() == [] and cut.untestable() == ("no configuration has trials in both no_skills and with_skills: "
                                                      "nothing to compare")
