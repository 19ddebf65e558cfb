"""SkillsBench's real Harbor trials (``../shared/fixtures/real-ab/skillsbench``): token fields that are null stay
unknown, never 0, and so does every flag that would need them; what is recorded is read as recorded."""

from __future__ import annotations

import json
import math

import pandas as pd
import pytest

from analysis_lib.metrics.trials_table import trials_table

pytestmark = pytest.mark.real_fixtures
NULL_TOKENS = "minimax-m2.1+claude-code/skills/gravitational-wave-detection__6j6wHy5"


@pytest.fixture(scope="module")
def table(skillsbench):
    res = trials_table(skillsbench, workers=1)
    assert not res.errors
    return res.frame.set_index("trial_path")


@pytest.fixture(scope="module")
def expected(skillsbench):
    return json.loads((skillsbench / "expected.json").read_text())


def _same(got, want) -> bool:
    return (want is None and pd.isna(got)) or (want is not None and not pd.isna(got) and math.isclose(got, want))


def test_every_trial_reads_its_reward_and_recorded_tokens(table, expected):
    """expected.json (stdlib + scipy, no project code): per trial the reward and agent_result's token fields as
    recorded (null stays null). Harbor's n_input_tokens includes cached tokens, as our input count does."""
    assert len(table) == len(expected["trials"]) == 25
    for t in expected["trials"]:
        row = table.loc[t["path"].removesuffix("/result.json")]
        assert _same(row["reward"], t["reward"]), t["path"]
        assert _same(row["total_input_tokens"], t["n_input_tokens"]), t["path"]
        assert _same(row["total_output_tokens"], t["n_output_tokens"]), t["path"]
        assert _same(row["total_cached_tokens"], t["n_cache_tokens"]), t["path"]


def test_a_trial_whose_token_fields_are_all_null_has_unknown_tokens_and_flags(table, expected):
    (t,) = [t for t in expected["trials"] if t["path"].startswith(NULL_TOKENS)]
    assert (t["n_input_tokens"], t["n_output_tokens"], t["cost_usd"], t["reward"]) == (None, None, None, 0.0)
    row = table.loc[NULL_TOKENS]
    assert row["success"] == False  # noqa: E712  (scored 0 after an agent timeout)
    for col in ("total_input_tokens", "total_output_tokens", "total_cached_tokens", "total_tokens", "total_cost_usd",
                "token_efficiency"):
        assert pd.isna(row[col]), col
    assert pd.isna(row["budget_exhaustion"]) and pd.isna(row["token_source"])
    # Trials that failed with recorded tokens (over 80,000) are known budget exhaustions.
    recorded = table.drop(index=NULL_TOKENS)
    failed = recorded[(recorded["success"] == False) & recorded["total_tokens"].notna()]  # noqa: E712
    assert len(failed) > 0 and failed["budget_exhaustion"].astype(bool).all()


def test_per_arm_counts_passes_and_rewards_equal_expected(table, expected):
    """The arm is only in the path (skills/, no_skills/); per arm: trials, passes (reward 1), mean reward with an
    unscored trial as 0, and the unscored trial is an infrastructure error."""
    arm = table.index.str.split("/").str[1].map({"skills": "with_skills", "no_skills": "no_skills"})
    for name, grp in table.groupby(arm):
        want = expected["arms"][name]
        assert len(grp) == want["trials"] and int((grp["success"] == True).sum()) == want["passes"]  # noqa: E712
        assert grp["reward"].fillna(0).mean() == pytest.approx(want["mean_reward_exceptions_as_zero"], rel=1e-12)
        assert int(grp["infra_error"].sum()) == want["unscored_trials"]
