"""The analysis plan: strict reading, canonical hash, the record beside the runs, and running it."""

from __future__ import annotations

import json
import os
from datetime import UTC
from pathlib import Path

import numpy as np
import pytest
import yaml

from analysis_lib import stats, write_comparisons
from analysis_lib.inference import comparisons
from analysis_lib.simulate.model import simulate_metrics
from analysis_lib.study import plan as P
from analysis_lib.study.baseline import profile_pairs

ROOT = Path(__file__).resolve().parents[1]
PLAN = ROOT / "params" / "analysis_plan.yaml"


def _write(tmp_path: Path, text: str, name: str = "plan.yaml") -> Path:
    p = tmp_path / name
    p.write_text(text)
    return p


def _plan_dict() -> dict:
    return yaml.safe_load(PLAN.read_text())


def test_default_plan_declares_the_three_tiers_of_the_methodology():
    plan = P.load_plan(PLAN)
    tiers = {t: [(m.id, m.test) for m in getattr(plan.tiers, t).metrics] for t in P.TIERS}
    assert tiers["primary"] == [("success", "mcnemar_exact"), ("total_tokens", "wilcoxon_signed_rank"),
                                ("total_cost_usd", "wilcoxon_signed_rank")]
    assert [i for i, _ in tiers["secondary"]] == ["elapsed_sec", "tool_calls_count", "exploration_breadth"]
    assert tiers["exploratory"] == [("cost_per_success", "descriptive"), ("mcp_calls__*", "descriptive"),
                                    ("time_to_first_edit_sec", "descriptive"), ("duplicate_reads", "descriptive")]
    assert (plan.tiers.primary.correction, plan.tiers.secondary.correction) == ("holm", "fdr_bh")
    assert plan.alpha == 0.05 and plan.bootstrap.n_resamples == 10_000 and plan.pairing.unit == "task"
    # Metric ids are the metrics_detail.csv columns themselves (the registry's ids).
    from analysis_lib.metrics.trial_metrics import metrics_frame

    columns = set(metrics_frame([]).columns)
    for tier in P.TIERS:
        for m in getattr(plan.tiers, tier).metrics:
            assert m.id in columns or m.id in ("mcp_calls__*", "cost_per_success")


def test_hash_is_of_the_parsed_plan_not_of_the_bytes(tmp_path):
    base = P.plan_hash(P.load_plan(PLAN))
    d = _plan_dict()
    # Comments, layout, key order and explicitly written defaults do not change the hash ...
    reordered = {k: d[k] for k in reversed(list(d))}
    reordered["bootstrap"]["method"] = "percentile"
    text = "# another comment\n" + yaml.safe_dump(reordered, default_flow_style=True)
    assert P.plan_hash(P.load_plan(_write(tmp_path, text))) == base
    d.pop("pairing")  # all defaults
    d["bootstrap"] = {"n_resamples": 10000}
    assert P.plan_hash(P.load_plan(_write(tmp_path, yaml.safe_dump(d), "defaults.yaml"))) == base
    # ... a value does.
    d["alpha"] = 0.01
    assert P.plan_hash(P.load_plan(_write(tmp_path, yaml.safe_dump(d), "alpha.yaml"))) != base
    assert len(base) == 64 and int(base, 16) >= 0


@pytest.mark.parametrize("edit, expected", [
    (lambda d: d.update(alpah=0.05), "bad.yaml: invalid analysis plan: alpah: unknown key"),
    (lambda d: d["tiers"]["primary"]["metrics"][1].update(id="total_tokenz"),
     "bad.yaml: invalid analysis plan: tiers.primary.metrics[1].id: unknown metric 'total_tokenz'"),
    (lambda d: d["tiers"]["primary"]["metrics"][1].update(test="t_test"),
     "bad.yaml: invalid analysis plan: tiers.primary.metrics[1].test: unknown value 't_test'"),
    (lambda d: d["tiers"]["primary"]["metrics"][1].update(test="mcnemar_exact"),
     "tiers.primary.metrics[1]: test mcnemar_exact needs a binary metric, but total_tokens is continuous"),
    (lambda d: d["tiers"]["exploratory"]["metrics"][2].update(test="wilcoxon_signed_rank"),
     "tiers.exploratory.metrics[2].test: exploratory metrics are described, not tested"),
    (lambda d: d["tiers"]["primary"]["metrics"][0].update(id="resolve_rate"),
     "tiers.primary.metrics[0].id: unknown metric 'resolve_rate': plan ids are the columns of metrics_detail.csv; "
     "use 'success'"),
    (lambda d: d["tiers"]["secondary"]["metrics"].append({"id": "tool_call_count", "test": "wilcoxon_signed_rank"}),
     "use 'tool_calls_count'"),
    (lambda d: d["tiers"]["secondary"]["metrics"].append({"id": "duplicate_reads", "test": "wilcoxon_signed_rank"}),
     "duplicate_reads is exploratory by definition"),
    (lambda d: d["tiers"]["exploratory"]["metrics"][0].update(test="wilcoxon_signed_rank"),
     "cost_per_success is a ratio of totals with a bootstrap interval: use descriptive"),
    (lambda d: d["tiers"]["secondary"].update(correction="bonferoni"),
     "tiers.secondary.correction: unknown value 'bonferoni'"),
    (lambda d: d["tiers"]["secondary"]["metrics"].append({"id": "total_tokens", "test": "wilcoxon_signed_rank"}),
     "tiers.secondary.metrics[3].id: total_tokens is already planned in the primary tier"),
    (lambda d: d.update(alpha="0.05"), "alpha: Input should be a valid number"),
    (lambda d: d["pairing"].update(unit="trial"), "pairing.unit: unknown value 'trial'"),
])
def test_malformed_plan_gives_one_line_naming_the_file_and_the_key(tmp_path, edit, expected):
    d = _plan_dict()
    edit(d)
    with pytest.raises(P.PlanError) as exc:
        P.load_plan(_write(tmp_path, yaml.safe_dump(d), "bad.yaml"))
    msg = str(exc.value)
    assert "\n" not in msg and msg.startswith("bad.yaml: ") and expected in msg, msg
    assert str(tmp_path) not in msg  # no machine path: the file as the user named it


def test_yaml_errors_duplicate_keys_and_missing_file(tmp_path):
    with pytest.raises(P.PlanError, match=r"^dup.yaml: invalid analysis plan: line 2: duplicate key 'alpha'$"):
        P.load_plan(_write(tmp_path, "alpha: 0.05\nalpha: 0.01\n", "dup.yaml"))
    with pytest.raises(P.PlanError, match=r"^syntax.yaml: invalid analysis plan: line \d+: "):
        P.load_plan(_write(tmp_path, "tiers: [primary\n", "syntax.yaml"))
    with pytest.raises(P.PlanError, match=r"top level must be a mapping"):
        P.load_plan(_write(tmp_path, "- 1\n", "list.yaml"))
    with pytest.raises(P.PlanError, match=r"absent.yaml: cannot read the analysis plan"):
        P.load_plan(Path("absent.yaml"))
    bad = tmp_path / "latin1.yaml"
    bad.write_bytes("name: d\xe9j\xe0\n".encode("latin-1"))  # not UTF-8: a PlanError, not an AttributeError
    with pytest.raises(P.PlanError, match=r"latin1.yaml: cannot read the analysis plan \(UnicodeDecodeError: 'utf-8' codec"):
        P.load_plan(bad)


def test_benjamini_hochberg_matches_statsmodels_and_a_hand_computed_case():
    from statsmodels.stats.multitest import multipletests

    # By hand: sorted p = 0.01, 0.03, 0.04 (m = 3): 0.01*3/1 = 0.03, 0.03*3/2 = 0.045, 0.04*3/3 = 0.04;
    # step-up minimum from the top: 0.04, 0.04, 0.03.
    np.testing.assert_allclose(stats.adjust_p([0.01, 0.04, 0.03], "fdr_bh"), [0.03, 0.04, 0.04])
    rng = np.random.default_rng(1)
    p = rng.uniform(size=9) ** 2
    np.testing.assert_allclose(stats.adjust_p(p, "fdr_bh"), multipletests(p, method="fdr_bh")[1], rtol=0, atol=1e-15)
    np.testing.assert_allclose(stats.adjust_p(p, "holm"), stats.holm(p))
    out = stats.adjust_p([0.02, np.nan, 0.01], "fdr_bh")
    assert np.isnan(out[1]) and out[0] == pytest.approx(0.02) and out[2] == pytest.approx(0.02)
    with pytest.raises(ValueError, match="correction must be"):
        stats.adjust_p([0.1], "bonferroni")


@pytest.fixture(scope="module")
def latent():
    return simulate_metrics(11, n_tasks=16, repetitions=3)


def test_corrections_run_over_the_whole_tier_across_all_profile_pairs(latent):
    from statsmodels.stats.multitest import multipletests

    plan = P.load_plan(PLAN)
    pairs = profile_pairs(latent["profile"].unique(), baseline="text")
    table = comparisons.compare(latent, plan, pairs)
    assert list(table.columns) == comparisons.COLUMNS
    prim = table[table["tier"] == "primary"]
    assert len(prim) == 6  # three metrics x two pairs, one family
    np.testing.assert_allclose(prim["p_adjusted"], multipletests(prim["p_value"], method="holm")[1], rtol=1e-12)
    sec = table[table["tier"] == "secondary"]
    np.testing.assert_allclose(sec["p_adjusted"], multipletests(sec["p_value"], method="fdr_bh")[1], rtol=1e-12)
    assert (table["significant"].dropna() == (table["p_adjusted"].dropna() < plan.alpha)).all()
    # The latent frame has no exploratory columns: each planned one says so instead of vanishing. It counts MCP calls
    # as totals only (some above 0): the per-tool row says no per-tool count was recorded, not that no tool was called.
    expl = table[table["tier"] == "exploratory"]
    assert expl["p_value"].isna().all() and expl["significant"].isna().all()
    assert {"no per-tool counts of MCP calls recorded in these runs",
            "column 'time_to_first_edit_sec' is not in the metrics table",
            "column 'duplicate_reads' is not in the metrics table"} <= set(expl["note"].dropna())


def test_a_refused_column_keeps_its_place_in_the_family(latent):
    plan = P.load_plan(PLAN)
    table = comparisons.compare(latent, plan, [("text", "codecanvas")], refused={"success": "refused: evaluations missing"})
    rr = table[table["metric"] == "success"].iloc[0]
    assert rr["note"] == "refused: evaluations missing; no test: counted as p = 1 in the tier's Holm correction"
    assert np.isnan(rr["p_value"]) and rr["n_pairs"] == 0
    tok = table[table["metric"] == "total_tokens"].iloc[0]
    assert tok["p_value"] < 0.05 and tok["estimate"] < 0  # -30 % tokens injected for codecanvas
    # The refused test still counts in the Holm family (as p = 1): the correction is over three tests, not two.
    prim = table[(table["tier"] == "primary") & table["p_value"].notna()]
    np.testing.assert_allclose(prim["p_adjusted"], stats.holm([*prim["p_value"], 1.0])[:2])


def _tree(root):
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def test_record_once_in_the_output_folder_then_detect_a_changed_plan_with_its_diff(tmp_path):
    runs, out = tmp_path / "runs", tmp_path / "out"
    runs.mkdir()
    (runs / "trial.json").write_text("{}")
    before = _tree(runs)
    plan = P.load_plan(PLAN)
    first = P.check_plan(runs, plan, out_dir=out)
    lock = out / P.LOCK_NAME
    rec = json.loads(lock.read_text())
    assert _tree(runs) == before  # the runs are input: nothing is written into them
    assert first.recorded_now and first.record_where == "output folder" and not first.changed
    assert rec["analysis_plan_sha256"] == P.plan_hash(plan) and rec["recorded_by"] == "first analysis into this output folder"
    assert rec["plan"] == plan.model_dump(mode="json", exclude_none=True) and rec["tool_version"] and rec["recorded_at"].endswith("Z")
    again = P.check_plan(runs, plan, out_dir=out)
    assert not again.recorded_now and not again.changed and again.banner() == []
    d = _plan_dict()
    d["alpha"] = 0.01
    d["tiers"]["secondary"]["metrics"].pop()
    other = P.parse_plan(d, "params/analysis_plan.yaml")
    changed = P.check_plan(runs, other, "params/analysis_plan.yaml", out_dir=out)
    assert changed.changed and json.loads(lock.read_text()) == rec  # the record is never replaced
    banner = "\n".join(changed.banner())
    assert banner.startswith("> **plan changed after the plan record:** the plan recorded in the output folder")
    assert "-alpha: 0.05\n+alpha: 0.01" in banner and "-    - id: exploration_breadth" in banner
    # A record the user names wins over the output folder's; a named record that is missing is an error.
    named = P.check_plan(runs, other, out_dir=tmp_path / "elsewhere", record_path=lock)
    assert named.changed and named.record_where == "named plan record" and not (tmp_path / "elsewhere").exists()
    with pytest.raises(P.PlanError, match="nowhere.json: plan record not found"):
        P.check_plan(runs, plan, record_path=tmp_path / "nowhere.json")


def test_preregistration_is_dated_against_the_first_trial(tmp_path):
    from datetime import datetime

    runs = tmp_path / "runs"
    runs.mkdir()
    plan = P.load_plan(PLAN)
    fixed = datetime(2026, 3, 1, 8, 0, tzinfo=UTC)
    assert P.write_preregistration(runs, plan, "params/analysis_plan.yaml", now=fixed) == runs / P.LOCK_NAME
    assert P.write_preregistration(runs, plan, "params/analysis_plan.yaml") is None  # a resumed run keeps its date
    check = P.check_plan(runs, plan, out_dir=tmp_path / "out")
    assert check.record_where == "run record" and not (tmp_path / "out" / P.LOCK_NAME).exists()
    check.note_first_trial([None, "2026-03-02T10:30:00.000Z", "2026-03-01T09:15:00Z", "garbage"])
    assert check.first_trial_at == "2026-03-01T09:15:00Z" and check.fixed_before_data is True
    assert check.timing_line() == ("The plan was fixed in the run record on 2026-03-01 08:00 UTC, 1 h 15 min before "
                                   "the first trial (2026-03-01 09:15 UTC): it is a pre-registration.")
    assert check.banner() == []
    check.note_first_trial(["2026-02-27T08:00:00Z"])
    assert check.fixed_before_data is False and "2 d after the first trial" in check.timing_line()
    assert check.banner()[0].startswith("> **plan fixed after the data:**")
    assert check.sidecar()["fixed_before_first_trial"] is False


def test_read_only_runs_analyse_and_unreadable_record_warns_instead_of_failing(tmp_path):
    plan = P.load_plan(PLAN)
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o555)
    try:
        # root writes into a 0o555 folder anyway: then an output "folder" below a file stands in for it.
        target = ro if not os.access(ro, os.W_OK) else _write(tmp_path, "x", "a_file") / "out"
        check = P.check_plan(tmp_path, plan, out_dir=target)
        assert not check.recorded_now and len(check.warnings) == 1 and "plan record not written" in check.warnings[0]
        assert check.sha256 == P.plan_hash(plan) and not check.changed
    finally:
        ro.chmod(0o755)
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / P.LOCK_NAME).write_text("{not json")
    check = P.check_plan(bad, plan, out_dir=tmp_path / "out2")
    assert "unreadable plan record" in check.warnings[0] and (bad / P.LOCK_NAME).read_text() == "{not json"
    assert check.banner()[0].startswith("> **analysis plan warning:**")


def test_committed_sample_is_preregistered_with_the_current_plan(sample_runs):
    rec = json.loads((sample_runs / P.LOCK_NAME).read_text())
    assert rec["analysis_plan_sha256"] == P.plan_hash(P.load_plan(PLAN)), (
        "params/analysis_plan.yaml changed: a deliberate change needs the sample regenerated (make sample)")
    assert rec["recorded_by"] == "runner, before the first trial"


def test_layer1_and_comparisons_carry_the_hash_and_flag_a_changed_plan(tmp_path):
    from builders import small_runs

    from analysis_lib.study.layer1 import analyse

    runs = small_runs(tmp_path / "runs", n_tasks=4)
    d = _plan_dict()
    d["alpha"] = 0.01
    earlier = P.parse_plan(d, "params/analysis_plan.yaml")
    out = tmp_path / "out"
    assert P.check_plan(runs, earlier, out_dir=out).recorded_now  # the data were first analysed under another plan
    result = analyse(runs, out, cache=False, workers=1)
    check = result.plan_check
    current = P.plan_hash(P.load_plan(PLAN))
    assert check.sha256 == current and check.changed
    agg = json.loads((out / "aggregate_metrics.json").read_text())
    assert agg["analysis_plan_sha256"] == current and agg["analysis_plan_changed"] is True
    side = json.loads((out / "analysis_plan.json").read_text())
    assert side["analysis_plan_sha256"] == current and side["recorded_sha256"] == P.plan_hash(earlier)
    result.plan_check = check
    write_comparisons(result, out)
    head = (out / "comparison_report.md").read_text().splitlines()
    assert head[0].startswith("> **plan changed after the plan record:**") and "+alpha: 0.05" in head
    # These trials carry no start time: the record cannot be dated against them, and the report says so.
    assert side["fixed_before_first_trial"] is None and side["first_trial_at"] is None
    assert any("the start of the first trial is unknown" in line for line in head)
    assert any(f"sha256 `{current}`" in line for line in head[:20])


ALL_REPS = PLAN.parent / "analysis_plan_all_repetitions.yaml"


def test_repetitions_choose_the_aggregates_and_the_tests_that_fit_them():
    p = P.load_plan(ALL_REPS)
    assert (p.pairing.repetitions, p.pairing.binary_aggregate, p.pairing.continuous_aggregate) == \
        ("all", "pass_rate", "geometric_mean")
    assert [(m.id, m.test, p.repetitions_of(m)) for m in p.tiers.sensitivity.metrics] == \
        [("success", "sign_flip", "all"), ("success", "mcnemar_exact", "majority"), ("success", "gee", "all")]
    d = _plan_dict()
    d["pairing"]["repetitions"] = "all"
    with pytest.raises(P.PlanError, match="binary_aggregate"):  # the default plan spells out majority_vote
        P.parse_plan(d, "p.yaml")
    for key in ("binary_aggregate", "continuous_aggregate"):
        d["pairing"].pop(key)
    with pytest.raises(P.PlanError, match="mcnemar_exact compares majority verdicts; with repetitions: all use "
                                          "paired_t, sign_flip, gee"):
        P.parse_plan(d, "p.yaml")
    d = _plan_dict()
    d["tiers"]["primary"]["metrics"][0] = {"id": "success", "test": "paired_t"}
    with pytest.raises(P.PlanError, match="paired_t compares per-task pass rates; it needs repetitions: all"):
        P.parse_plan(d, "p.yaml")
    d = _plan_dict()
    d["tiers"]["sensitivity"] = {"correction": "none", "metrics": [{"id": "duplicate_reads", "test": "wilcoxon_signed_rank"}]}
    with pytest.raises(P.PlanError, match="duplicate_reads is not a primary or secondary metric"):
        P.parse_plan(d, "p.yaml")


@pytest.mark.slow  # the whole plan over the sample runs: ~4 s
def test_the_all_repetitions_plan_runs_with_sensitivity_rows_beside_the_planned_ones(sample_runs):
    from analysis_lib.report.comparison_report import methods_lines, tier_table
    from analysis_lib.study.layer1 import analyse

    m = analyse(sample_runs, None, cache=False, workers=1).metrics
    plan = P.load_plan(ALL_REPS)
    t = comparisons.compare(m, plan, profile_pairs(m["profile"].unique(), baseline="text"))
    s = t[(t["metric"] == "success") & (t["profile_b"] == "codecanvas")].set_index("tier")
    primary, sens = s.loc["primary"], t[(t["tier"] == "sensitivity") & (t["profile_b"] == "codecanvas")]
    # pass@1 is the mean of per-task pass rates, computed here by hand from the trials.
    ok = m[~m["infra_error"].astype(bool)]
    rates = ok.groupby(["profile", "task_id"])["success"].mean().unstack(0)
    assert primary["estimate"] == pytest.approx((rates["codecanvas"] - rates["text"]).mean())
    assert primary["scale"] == "pass_rate" and primary["test"] == "paired t"
    assert (primary["ci_low"] > 0) == (primary["p_value"] < 0.05)
    assert list(sens["test"]) == ["sign-flip randomisation", "McNemar exact",
                                  "GEE (identity link, exchangeable, task clusters; bias-reduced SE, t with tasks − 1 df)"]
    assert sens["p_adjusted"].isna().all() and sens["significant"].isna().all()  # no family, no verdict
    text = tier_table(t, "sensitivity")
    assert "(repetitions: majority)" in text and "p (Holm)" not in text
    assert "pass@1" in "\n".join(methods_lines(plan))


def test_a_plan_with_hypotheses_names_the_family_that_carries_its_claim():
    d = P.load_plan("params/analysis_plan_all_repetitions.yaml").model_dump(mode="json")
    assert P.parse_plan(d).claim == "hypotheses"
    with pytest.raises(P.PlanError, match="claim_family: a plan with hypotheses must say which family"):
        P.parse_plan({**d, "claim_family": None}, "plan.yaml")
    with pytest.raises(P.PlanError, match="claim_family: hypotheses, but the plan declares no hypotheses"):
        P.parse_plan({**d, "hypotheses": []}, "plan.yaml")
    assert P.parse_plan({**d, "hypotheses": [], "claim_family": None}).claim == "primary"
    # unset, the key stays out of the canonical plan: a plan without hypotheses keeps its hash
    assert "claim_family" not in P.plan_yaml(P.parse_plan({**d, "hypotheses": [], "claim_family": None}))


def test_the_mean_outcome_beside_pass_fail_is_reported_only_under_partial_credit(latent):
    plan = P.load_plan(PLAN)
    assert P.plan_hash(plan) == P.plan_hash(P.parse_plan({**plan.model_dump(mode="json", exclude_none=True)}))
    assert plan.partial().tests == ["paired_t", "sign_flip"] and plan.partial_credit is None  # the default: hash unchanged
    pairs = [("text", "codegraph")]
    rng = np.random.default_rng(5)
    binary = latent.assign(reward=latent["success"].astype(float))
    assert not comparisons.partial_credit(binary)
    assert "partial_credit" not in set(comparisons.compare(binary, plan, pairs)["tier"])  # 0/1 rewards: pass/fail says it all
    scored = latent.assign(reward=np.round(rng.uniform(0, 1, len(latent)), 2))
    table = comparisons.compare(scored, plan, pairs)
    rows = table[table["tier"] == "partial_credit"]
    assert list(rows["test"]) == ["paired t", "sign-flip randomisation"] and (rows["correction"] == "none").all()
    # The estimate is the mean over tasks of the per-task difference of the trials' mean reward.
    per_task = scored.groupby(["task_id", "profile"])["reward"].mean().unstack()
    assert rows["estimate"].iloc[0] == pytest.approx((per_task["codegraph"] - per_task["text"]).mean(), rel=1e-12)
    off = P.parse_plan({**plan.model_dump(mode="json", exclude_none=True), "partial_credit": {"tests": []}})
    assert P.plan_hash(off) != P.plan_hash(plan)
    assert "partial_credit" not in set(comparisons.compare(scored, off, pairs)["tier"])
    with pytest.raises(P.PlanError, match="partial_credit: metric: total_tokens is not compared as a difference of means"):
        P.parse_plan({**plan.model_dump(mode="json", exclude_none=True), "partial_credit": {"metric": "total_tokens"}}, "p.yaml")
