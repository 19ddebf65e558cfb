"""Unit tests of the judge's pure parts: agreement statistics, templates, cache keys, pricing, condensation."""

from __future__ import annotations

import math

import numpy as np
import pytest
from judge_fakes import make_trial

from analysis_lib.judge.agreement import cohen_kappa, fleiss_kappa, krippendorff_alpha_nominal, percent_agreement, self_agreement_row
from analysis_lib.judge.cache import ResponseCache, cache_key
from analysis_lib.judge.condense import condense, naive_dump
from analysis_lib.judge.schemas import FailureAnalysis, StrategyAnalysis, comparative_model
from analysis_lib.judge.templates import load_template, parse_template
from analysis_lib.metrics.pricing import cost_usd, model_prices

# -- agreement ------------------------------------------------------------------------------

def test_cohen_kappa_textbook_example():
    # Wikipedia "Cohen's kappa", worked example: 50 proposals, yes/yes 20, yes/no 5, no/yes 10,
    # no/no 15 -> p_o = 0.7, p_e = 0.5, kappa = 0.4 exactly.
    a = ["yes"] * 25 + ["no"] * 25
    b = ["yes"] * 20 + ["no"] * 5 + ["yes"] * 10 + ["no"] * 15
    assert cohen_kappa(a, b) == pytest.approx(0.4, abs=1e-12)
    assert percent_agreement(a, b) == pytest.approx(0.7)


def test_cohen_kappa_matches_statsmodels_on_random_labels():
    from statsmodels.stats.inter_rater import cohens_kappa, to_table

    rng = np.random.default_rng(7)
    cats = ["a", "b", "c", "d"]
    a = rng.choice(cats, 200)
    b = np.where(rng.random(200) < 0.6, a, rng.choice(cats, 200))
    codes = np.column_stack([[cats.index(x) for x in a], [cats.index(x) for x in b]])
    table, _ = to_table(codes, bins=np.arange(len(cats) + 1))
    ref = cohens_kappa(table).kappa  # statsmodels.stats.inter_rater.cohens_kappa, unweighted
    assert cohen_kappa(list(a), list(b)) == pytest.approx(ref, abs=1e-12)


def test_cohen_kappa_drops_missing_and_degenerate_cases():
    assert cohen_kappa(["x", None, "y"], ["x", "y", None]) is not None
    assert cohen_kappa([None], ["x"]) is None
    assert math.isnan(cohen_kappa(["x", "x"], ["x", "x"]))  # one category only: undefined


def test_fleiss_kappa_textbook_example():
    # Fleiss (1971) as given on Wikipedia "Fleiss' kappa": 10 subjects, 14 raters, 5 categories;
    # kappa = 0.210 (rounded to 3 places there).
    counts = [
        [0, 0, 0, 0, 14], [0, 2, 6, 4, 2], [0, 0, 3, 5, 6], [0, 3, 9, 2, 0], [2, 2, 8, 1, 1],
        [7, 7, 0, 0, 0], [3, 2, 6, 3, 0], [2, 5, 3, 2, 2], [6, 5, 2, 1, 0], [0, 2, 2, 3, 7],
    ]
    units = [[c for c, n in enumerate(row) for _ in range(n)] for row in counts]
    assert fleiss_kappa(units) == pytest.approx(0.210, abs=5e-4)


def test_krippendorff_alpha_published_examples():
    # Krippendorff (2011), "Computing Krippendorff's Alpha-Reliability", sec. C: 4 observers x 12 units
    # with missing values; nominal alpha = 0.743.
    A = [1, 2, 3, 3, 2, 1, 4, 1, 2, None, None, None]
    B = [1, 2, 3, 3, 2, 2, 4, 1, 2, 5, None, 3]
    C = [None, 3, 3, 3, 2, 3, 4, 2, 2, 5, 1, None]
    D = [1, 2, 3, 3, 2, 4, 4, 1, 2, 5, 1, None]
    assert krippendorff_alpha_nominal(list(zip(A, B, C, D, strict=True))) == pytest.approx(0.743, abs=5e-4)
    # Wikipedia "Krippendorff's alpha" example: 3 coders x 15 units, nominal alpha = 0.691.
    rows = ["* * * * * 3 4 1 2 1 1 3 3 * 3", "1 * 2 1 3 3 4 3 * * * * * * *", "* * 2 1 3 4 4 * 2 1 1 3 3 * 4"]
    units = [[None if v == "*" else v for v in u] for u in zip(*(r.split() for r in rows), strict=True)]
    assert krippendorff_alpha_nominal(units) == pytest.approx(0.691, abs=5e-4)


def test_alpha_and_kappa_agree_in_the_large_sample_limit():
    # For two coders and no missing data, alpha = 1 - (n-1)/n * (1 - pi): close to kappa when marginals match.
    a = ["p", "q"] * 500
    b = ["p", "q"] * 450 + ["q", "p"] * 50
    assert krippendorff_alpha_nominal(list(zip(a, b, strict=True))) == pytest.approx(cohen_kappa(a, b), abs=2e-3)


def test_self_agreement_row_counts_units_where_all_samples_agree():
    row = self_agreement_row("x", [["a", "a", "a"], ["a", "b", "a"], ["b", "b", "b"], [None, "a", None]])
    assert row["units"] == 3
    assert row["percent_agreement"] == pytest.approx(2 / 3)
    assert row["fleiss_kappa"] is not None and row["krippendorff_alpha"] is not None


# -- templates, schemas, cache --------------------------------------------------------------

@pytest.mark.parametrize("name", ["strategy", "failure", "mcp", "comparative", "synthesis", "repair"])
def test_every_packaged_template_has_front_matter_and_sections(name):
    tpl = load_template(name)
    assert tpl.name == name and tpl.version
    assert tpl.sections[-1][0] == "user"


def test_template_errors_name_the_source_and_missing_variables_raise():
    with pytest.raises(ValueError, match="broken.md"):
        parse_template("no front matter", source="broken.md")
    tpl = parse_template("---\nname: t\nversion: 2\n---\n# user\nHello $who {\"json\": true}\n")
    assert tpl.render({"who": "x"}) == [{"role": "user", "content": 'Hello x {"json": true}\n'}]
    with pytest.raises(KeyError):
        tpl.render({})


def test_schemas_use_the_issue_field_names_and_enums():
    assert set(StrategyAnalysis.model_fields) == {"primary_strategy", "strategy_quality", "adaptation_events"}
    assert set(FailureAnalysis.model_fields) == {"root_cause", "critical_step", "counterfactual"}
    enum = FailureAnalysis.model_json_schema()["properties"]["root_cause"]["enum"]
    assert "infinite_loop" in enum and len(enum) == 8
    comp = comparative_model(["text", "codegraph"]).model_json_schema()
    assert comp["properties"]["winner"]["enum"] == ["codegraph", "text", "tie"]


def test_cache_key_depends_on_model_version_input_and_sample_only(tmp_path):
    msgs = [{"role": "user", "content": "x"}]
    k = cache_key("m", "strategy", "1", msgs, {"s": 1}, 0)
    assert k != cache_key("m2", "strategy", "1", msgs, {"s": 1}, 0)
    assert k != cache_key("m", "strategy", "2", msgs, {"s": 1}, 0)
    assert k != cache_key("m", "strategy", "1", [{"role": "user", "content": "y"}], {"s": 1}, 0)
    assert k != cache_key("m", "strategy", "1", msgs, {"s": 1}, 1)
    assert k == cache_key("m", "strategy", "1", [dict(msgs[0])], {"s": 1}, 0)  # canonical
    cache = ResponseCache(tmp_path)
    assert cache.get(k) is None
    cache.put(k, {"ok": True, "data": {"a": 1}})
    assert cache.get(k)["data"] == {"a": 1}
    cache.path(k).write_text("{broken")  # a torn entry is a miss, not a crash
    assert cache.get(k) is None


# -- pricing -----------------------------------------------------------------------------------

def test_openrouter_model_takes_the_vendor_price_and_unknown_is_not_zero():
    direct = model_prices("gpt-5.2")
    assert direct is not None and direct.input > 0
    assert model_prices("openrouter/openai/gpt-5.2") == direct
    assert model_prices("openai/no-such-model-xyz") is None
    assert cost_usd("openai/no-such-model-xyz", 10, 10) is None
    assert cost_usd("gpt-5.2", 1000, 100) == pytest.approx(1000 * direct.input + 100 * direct.output)
    assert cost_usd("gpt-5.2", None, 100) is None  # unknown usage: unknown cost


# -- condensation ------------------------------------------------------------------------------

def test_condense_keeps_head_tail_errors_and_step_numbers():
    t = make_trial("text", "task-x", 0, success=False, n_steps=60, long_output=3000)
    c = condense(t.trajectory, max_chars=6000)
    assert c.total_steps == 60 and c.shown_steps < 60
    assert c.condensed_chars <= 6000 + 200
    assert c.naive_chars == len(naive_dump(t.trajectory)) and c.ratio < 0.2
    for n in (1, 2, 3, 58, 59, 60):  # head and tail
        assert f"[step {n}]" in c.text
    assert "[step 60] agent ERROR" in c.text  # the failing test run is marked
    assert "steps omitted" in c.text
    assert "chars]" in c.text  # long observations are trimmed with a marker


def test_condense_small_trajectory_is_whole_and_empty_is_explicit():
    t = make_trial("text", "t", 0, success=True, n_steps=5)
    c = condense(t.trajectory)
    assert c.shown_steps == 5 and "omitted" not in c.text
    assert condense(None).text == "(no trajectory recorded)"


@pytest.mark.slow  # a fresh interpreter imports litellm: ~3 s
def test_importing_the_judge_selects_the_offline_price_map_before_litellm(tmp_path):
    import os
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if k not in ("LITELLM_LOCAL_MODEL_COST_MAP", "LITELLM_LOG")}
    code = (
        "import sys, os; import analysis_lib.judge.client; "
        "print(os.environ['LITELLM_LOCAL_MODEL_COST_MAP'], os.environ['LITELLM_LOG'], 'litellm' in sys.modules)"
    )
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    out = subprocess.run([sys.executable, "-c", code], env=env, cwd=root, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["True", "ERROR", "True"]
    assert out.stderr == ""  # no price-map fetch warning, no debug banner
