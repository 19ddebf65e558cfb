"""Published per-task results tables as input: a results CSV and SkillsBench's results registry become trials with
the repetition structure they imply, found by content, with what they do not carry left empty (never 0)."""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest

from analysis_lib import stats
from analysis_lib.core import registry
from analysis_lib.inference.comparisons import compare
from analysis_lib.inference.pooling import compare_configurations, configuration_pairs
from analysis_lib.inference.rates import profile_rates
from analysis_lib.ingest.discover import discover
from analysis_lib.ingest.results_table import profile_name, read_results_csv
from analysis_lib.metrics.trial_metrics import MetricsConfig
from analysis_lib.metrics.trials_table import trials_table
from analysis_lib.study.plan import load_plan

REGISTRY = "results-registry.json"
PLAN_ALL = "params/analysis_plan_all_repetitions.yaml"
# What a results table never carries: every metric computed from a trajectory, tests, times or tokens.
NOT_CARRIED = [m.id for m in registry.METRICS.values()
               if m.id not in ("success", "reward", "cost_estimated", "budget_exhaustion", "premature_stop",
                               "mcp_calls_by_tool", "tool_distribution") and m.kind != "record"]


def _write(path, rows: list[dict]) -> None:
    pd.DataFrame(rows).to_csv(path, index=False)


def _cells(frame: pd.DataFrame) -> pd.DataFrame:
    """Per profile and task: trials and passes (the table the reader was given back)."""
    return frame.groupby(["profile", "task_id"])["success"].agg(trials="count", passes="sum").reset_index()


@pytest.fixture
def small_table(tmp_path):
    rows = [{"config": c, "arm": arm, "task_id": f"t{t}", "trials": 3, "passes": p}
            for c, table in (("agent-x", {"base": [0, 1, 3, 2], "tools": [2, 3, 3, 1]}),
                             ("agent-y", {"base": [1, 0, 0, 3], "tools": [3, 2, 1, 3]}))
            for arm, passes in table.items() for t, p in enumerate(passes)]
    _write(tmp_path / "results.csv", rows)
    return tmp_path


def test_a_results_csv_is_found_by_content_and_read_as_its_trials(small_table):
    (small_table / "notes.csv").write_text("a,b\n1,2\n")  # a CSV of another kind is not a source
    sources, errors = discover(small_table)
    assert [(s.kind, s.source_format) for s in sources] == [("results_csv", "results_csv")] and not errors
    res = trials_table(small_table, workers=1)
    assert not res.errors and len(res.frame) == 2 * 2 * 4 * 3
    cells = _cells(res.frame).set_index(["profile", "task_id"])
    assert cells.loc[(profile_name("agent-x", "tools"), "t0")].tolist() == [3, 2]
    assert cells.loc[(profile_name("agent-y", "base"), "t3")].tolist() == [3, 3]
    first = res.frame.iloc[0]
    assert first["trial_path"] == "results.csv#agent-x/base/t0/1" and first["source_format"] == "results_csv"
    assert json.loads(first["run_config"]) == {"arm": "base", "configuration": "agent-x"}
    # What the table does not carry is empty, never 0 (and no flag claims what it cannot know).
    assert res.frame[NOT_CARRIED].isna().all().all(), res.frame[NOT_CARRIED].notna().sum()[lambda s: s > 0]
    failed = res.frame["success"] == False  # noqa: E712
    assert res.frame.loc[failed, "budget_exhaustion"].isna().all() and res.frame.loc[failed, "premature_stop"].isna().all()


def test_pass_rates_pass_at_k_and_all_repetitions_inference_run_on_a_table(small_table):
    m = trials_table(small_table, workers=1).frame
    rates = profile_rates(m).set_index("profile")
    assert rates.loc[profile_name("agent-x", "base"), "pass_rate"] == pytest.approx(6 / 12)
    pk = stats.pass_at_k(m, 2).set_index("profile")
    # agent-x base: passes 0, 1, 3, 2 of 3 -> pass@2 = mean(0, 2/3, 1, 1) (Chen et al. 2021, eq. 1, by hand).
    assert pk.loc[profile_name("agent-x", "base"), "pass_at_k"] == pytest.approx((0 + 2 / 3 + 1 + 1) / 4)
    pairs = configuration_pairs(m, "base", "tools")
    assert pairs == {"agent-x": (profile_name("agent-x", "base"), profile_name("agent-x", "tools")),
                     "agent-y": (profile_name("agent-y", "base"), profile_name("agent-y", "tools"))}
    rows = compare_configurations(m, load_plan(PLAN_ALL), pairs)
    x = rows[(rows["configuration"] == "agent-x") & (rows["metric"] == "success") & (rows["tier"] == "primary")].iloc[0]
    d = np.array([2 - 0, 3 - 1, 3 - 3, 1 - 2]) / 3  # per-task pass-rate differences, by hand
    ref = stats.paired_t(d).iloc[0]
    assert x["estimate"] == pytest.approx(d.mean()) and x["ci_low"] == pytest.approx(ref["ci_low"])


def test_mcnemar_runs_on_a_table_of_per_task_majority_verdicts(tmp_path):
    """One verdict per task (trials = 1): McNemar's exact test on the discordant tasks (scipy binomtest by hand)."""
    a = [1, 0, 0, 0, 1, 0, 0, 0, 1, 0]
    b = [1, 1, 1, 1, 0, 1, 1, 0, 1, 1]
    _write(tmp_path / "verdicts.csv", [{"config": "c", "arm": arm, "task_id": f"t{i}", "trials": 1, "passes": v}
                                       for arm, vs in (("A", a), ("B", b)) for i, v in enumerate(vs)])
    m = trials_table(tmp_path, workers=1).frame
    row = compare(m, load_plan(), [(profile_name("c", "A"), profile_name("c", "B"))])
    row = row[row["metric"] == "success"].iloc[0]
    assert (row["n_a_only"], row["n_b_only"]) == (1, 6)
    from scipy.stats import binomtest
    assert row["p_value"] == pytest.approx(binomtest(1, 7, 0.5).pvalue)  # 0.125


def test_optional_columns_rewards_tokens_and_cost(tmp_path):
    _write(tmp_path / "r.csv", [
        {"config": "c", "arm": "A", "task_id": "t1", "trials": 2, "passes": 1, "mean_reward": 0.5, "tokens": 1200,
         "cost": 0.25},
        {"config": "c", "arm": "A", "task_id": "t2", "trials": 2, "passes": 1, "mean_reward": 0.7, "tokens": "",
         "cost": ""},
    ])
    res = trials_table(tmp_path, workers=1, config=MetricsConfig(success_rule="reward > 0"))
    m = res.frame.set_index(["task_id", "repetition"])
    # t1: mean 0.5 with 1 pass of 2 -> all or nothing: rewards 1 and 0, re-decided by the success rule.
    assert m.loc[("t1", 1), "reward"] == 1.0 and m.loc[("t1", 2), "reward"] == 0.0
    assert m.loc[("t1", 1), "total_tokens"] == 1200 and m.loc[("t1", 1), "total_cost_usd"] == 0.25
    assert pd.isna(m.loc[("t1", 1), "total_input_tokens"])  # only the total is carried
    # t2: a partial mean: rewards unknown, success is the table's passes, tokens and cost unknown.
    assert m.loc["t2", "reward"].isna().all() and m.loc["t2", "success"].tolist() == [True, False]
    assert m.loc["t2", ["total_tokens", "total_cost_usd"]].isna().all().all()
    assert [e.severity for e in res.errors] == ["warning"] and "mean reward" in res.errors[0].message


@pytest.mark.parametrize("row, says", [
    ({"config": "c", "arm": "A", "task_id": "t", "trials": 3, "passes": 4}, "passes a whole number from 0 to trials"),
    ({"config": "c", "arm": "A", "task_id": "t", "trials": 0, "passes": 0}, "trials must be a whole number >= 1"),
    ({"config": "c", "arm": "", "task_id": "t", "trials": 2, "passes": 1}, "must not be empty"),
    ({"config": "c", "arm": "A", "task_id": "t", "trials": 2, "passes": 1, "mean_reward": 1.5}, "mean_reward"),
])
def test_a_bad_row_is_one_error_naming_the_file_and_line_and_the_rest_is_read(tmp_path, row, says):
    good = {"config": "c", "arm": "A", "task_id": "ok", "trials": 2, "passes": 1}
    _write(tmp_path / "r.csv", [good, row])
    trials, errors = read_results_csv(tmp_path / "r.csv")
    assert len(trials) == 2 and len(errors) == 1
    assert errors[0].path.endswith("r.csv") and "line 3" in errors[0].message and says in errors[0].message


def test_a_csv_without_the_required_columns_is_not_taken_for_a_table(tmp_path):
    (tmp_path / "r.csv").write_text("config,arm,task_id,trials\nc,A,t,3\n")
    sources, errors = discover(tmp_path)
    assert sources == [] and [e.message for e in errors] == ["no trials found (empty folder or unknown layout)"]
    trials, errors = read_results_csv(tmp_path / "r.csv")
    assert trials == [] and "no column passes" in errors[0].message


# --------------------------------------------------------------------------- SkillsBench's results registry


@pytest.fixture(scope="module")
def registry_trials(skillsbench_registry):
    """The registry read twice: passCount as the pass (reward > 0) and perfectCount (the default reward == 1)."""
    return {rule: trials_table(skillsbench_registry, workers=1, config=MetricsConfig(success_rule=rule))
            for rule in ("reward > 0", "reward == 1")}


@pytest.fixture(scope="module")
def expected(skillsbench_registry):
    return json.loads((skillsbench_registry / "expected.json").read_text())


@pytest.mark.real_fixtures
def test_the_registry_is_found_by_content_and_every_record_is_its_trials(skillsbench_registry, registry_trials, expected):
    sources, errors = discover(skillsbench_registry)
    assert [s.kind for s in sources] == ["skillsbench_registry"] and not errors  # expected.json is not a source
    res = registry_trials["reward > 0"]
    assert not res.errors and len(res.frame) == 3 * expected["counts"]["records"]
    m = res.frame
    assert m[NOT_CARRIED].isna().all().all()
    assert set(m["run_config"].map(lambda r: json.loads(r)["harness"])) == {"Codex", "OpenHands"}
    for cfg in expected["per_config"]:
        for arm, key in (("No Skills", "no_skills"), ("With Skills", "with_skills")):
            sub = m[m["profile"] == profile_name(cfg["model"], arm)]
            perfect = registry_trials["reward == 1"].frame
            perfect = perfect[perfect["profile"] == profile_name(cfg["model"], arm)]
            assert (len(sub), int(sub["success"].sum()), int(perfect["success"].sum())) == \
                (cfg[key]["trials"], cfg[key]["passes"], cfg[key]["perfect"]), (cfg["model"], arm)


@pytest.mark.real_fixtures
def test_the_registry_keeps_each_records_mean_reward(skillsbench_registry, registry_trials):
    """score is the mean reward in percent: the trials of a record average to it (to its rounding, 0.05 points)."""
    records = json.loads((skillsbench_registry / REGISTRY).read_text())
    m = registry_trials["reward > 0"].frame
    means = m.groupby(["profile", "task_id"])["reward"].mean()
    for r in records[:: 7]:
        assert 100 * means[(profile_name(r["model"], r["condition"]), r["task"])] == pytest.approx(r["score"], abs=0.051)


@pytest.mark.real_fixtures
def test_per_configuration_differences_and_mcnemar_counts_equal_expected(registry_trials, expected):
    """expected.json (stdlib + scipy, no project code): per configuration the mean per-task difference in pass
    proportion (With - No) with its paired t interval and p, and McNemar's b, c and exact p on majority verdicts."""
    m = registry_trials["reward > 0"].frame
    pairs = configuration_pairs(m, "No Skills", "With Skills")
    assert sorted(pairs) == sorted(c["model"] for c in expected["per_config"])
    allreps = compare_configurations(m, load_plan(PLAN_ALL), pairs)
    majority = compare_configurations(m, load_plan(), pairs)
    for cfg in expected["per_config"]:
        row = allreps[(allreps["configuration"] == cfg["model"]) & (allreps["metric"] == "success")
                      & (allreps["tier"] == "primary")].iloc[0]
        assert row["n_pairs"] == cfg["n_tasks"]
        assert row["estimate"] == pytest.approx(cfg["mean_difference"], rel=1e-12)
        assert [row["ci_low"], row["ci_high"]] == pytest.approx(cfg["paired_t_ci95"], rel=1e-10)
        assert row["p_value"] == pytest.approx(cfg["paired_t_p"], rel=1e-8)
        mc = majority[(majority["configuration"] == cfg["model"]) & (majority["metric"] == "success")].iloc[0]
        assert (mc["n_a_only"], mc["n_b_only"]) == (cfg["mcnemar_b"], cfg["mcnemar_c"])
        assert mc["p_value"] == pytest.approx(cfg["mcnemar_exact_p"], rel=1e-10)


@pytest.mark.real_fixtures
def test_with_the_default_success_rule_the_registry_counts_full_rewards(registry_trials, expected):
    """expected.json's sensitivity analysis: perfectCount in place of passCount."""
    m = registry_trials["reward == 1"].frame
    rows = compare_configurations(m, load_plan(PLAN_ALL), configuration_pairs(m, "No Skills", "With Skills"))
    got = rows[(rows["metric"] == "success") & (rows["tier"] == "primary")].set_index("configuration")["estimate"]
    for cfg in expected["per_config"]:
        assert got[cfg["model"]] == pytest.approx(cfg["perfect_mean_difference"], rel=1e-12)
        assert math.isfinite(got[cfg["model"]])
