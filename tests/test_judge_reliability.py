"""Judge reliability: blinding, class order, majority of K samples, AC1 and intervals, shared cache.

Everything runs against the loopback OpenAI-compatible server (tests/llm_server.py); what the
judge saw is read from the HTTP request bodies the server received.
"""

from __future__ import annotations

import argparse
import json
import math
import re

import numpy as np
import pytest
from judge_fakes import FAILURE, answer_for, make_trial
from side_envs import locked_env, run_json

from analysis_lib.core.trial import Step, ToolCall
from analysis_lib.judge.agreement import (
    bootstrap_ci,
    cohen_kappa,
    confusion_matrix,
    gwet_ac1,
    krippendorff_alpha_nominal,
    majority_label,
    pair_reliability,
)
from analysis_lib.judge.blind import Blinder, split_tool, vocabulary
from analysis_lib.judge.cache import default_cache_dir
from analysis_lib.judge.class_order import CLASSES, class_order
from analysis_lib.judge.run import run_layer2


def options(url: str, **kw) -> argparse.Namespace:
    base = dict(model="openai/loopback-judge", api_base=url, quiet=True, seed=0, bootstrap_reps=200, baseline="text")
    base.update(kw)
    return argparse.Namespace(**base)


ARM_NAMES = ("graphmcp", "plainarm", "codegraph", "get_dependencies", "search_code", "mcp__")


def arm_trials():
    """Two arms with distinctive names; the MCP arm calls two MCP tools and names its server in prose."""
    trials = []
    for task, (ok_plain, ok_mcp) in {"task-0": (False, True), "task-1": (False, False)}.items():
        trials.append(make_trial("plainarm", task, 0, success=ok_plain))
        t = make_trial("graphmcp", task, 0, success=ok_mcp, mcp=True)
        t.trajectory.steps.insert(
            2,
            Step(
                step_id=2,
                source="agent",
                message="The codegraph server (graphmcp setup) has codegraph__search_code: use Codegraph.",
                tool_calls=[ToolCall(step_id=2, name="mcp__codegraph__search_code", arguments={"q": "parse"}, output="src/parse.py")],
            ),
        )
        trials.append(t)
    # The baseline's task prompt also names the server: blinded there too.
    trials[0].trajectory.steps[0].message += " (no codegraph here)"
    return trials


def test_no_arm_identifying_string_reaches_a_blinded_prompt(llm_server, tmp_path, no_keys):
    llm_server.default = answer_for
    summary = run_layer2(arm_trials(), None, tmp_path / "out", options(llm_server.url))
    assert summary["failed_analyses"] == []
    bodies = [b for b in llm_server.requests if b["response_format"]["json_schema"]["name"] != "Synthesis"]
    names = {b["response_format"]["json_schema"]["name"] for b in bodies}
    assert names == {"StrategyAnalysis", "FailureAnalysis", "MCPUtilization", "ComparativeNarrative"}
    for body in bodies:
        sent = json.dumps(body).lower()  # messages and the response schema (the comparative winner enum)
        for name in ARM_NAMES:
            assert name.lower() not in sent, (name, body["response_format"]["json_schema"]["name"])
    mcp_prompt = next(b for b in bodies if b["response_format"]["json_schema"]["name"] == "MCPUtilization")["messages"][-1]["content"]
    # Consistent within the prompt: the tool listed in the header is the one in the trajectory.
    header = re.search(r"MCP tools called: (.*)", mcp_prompt).group(1)
    assert header == "tool_A x1, tool_B x1"
    assert "tool_A" in mcp_prompt.split("Condensed trajectory")[1] and "server_1" in mcp_prompt
    assert "Profile (agent configuration): arm\n" in mcp_prompt
    comp = next(b for b in bodies if b["response_format"]["json_schema"]["name"] == "ComparativeNarrative")
    assert comp["response_format"]["json_schema"]["schema"]["properties"]["winner"]["enum"] == ["arm_1", "arm_2", "tie"]
    # Answers are mapped back: the comparative winner is a real profile name in the outputs.
    md = (tmp_path / "out" / "comparative_narratives.md").read_text()
    assert re.search(r"\*\*Winner:\*\* (plainarm|graphmcp)", md)
    recs = json.loads((tmp_path / "out" / "strategy_analysis.json").read_text())["records"]
    assert all(r["blinded"] for r in recs) and {r["profile"] for r in recs} == {"plainarm", "graphmcp"}


def test_unblind_mcp_shows_the_tools_to_that_analysis_only(llm_server, tmp_path, no_keys):
    llm_server.default = answer_for
    run_layer2(arm_trials(), None, tmp_path / "out", options(llm_server.url, unblind_mcp=True))
    by = {}
    for b in llm_server.requests:
        by.setdefault(b["response_format"]["json_schema"]["name"], []).append(json.dumps(b))
    assert all("mcp__codegraph__get_dependencies" in s for s in by["MCPUtilization"])
    assert not any("codegraph" in s for s in by["StrategyAnalysis"] + by["FailureAnalysis"])
    llm_server.reset()
    run_layer2(arm_trials(), None, tmp_path / "out2", options(llm_server.url, blind=False))
    assert any("graphmcp" in json.dumps(b) for b in llm_server.requests)


def test_blinder_units():
    assert split_tool("mcp__codegraph__search_code") == ("codegraph", "search_code")
    assert split_tool("codegraph__search_code") == ("codegraph", "search_code")
    assert split_tool("Bash") == (None, "Bash")
    vocab = vocabulary(arm_trials())
    assert vocab.servers == {"codegraph"} and vocab.profiles == {"plainarm", "graphmcp"}
    b = Blinder(vocab)
    text = b.text("call mcp__codegraph__search_code then codegraph__get_dependencies; CodeGraph helps graphmcp")
    assert text == "call tool_A then tool_B; server_1 helps arm"
    assert b.mapping == {"server_1": "codegraph", "tool_A": "search_code", "tool_B": "get_dependencies", "arm": "graphmcp"}
    # A profile that is an everyday word keeps its everyday meaning in the text.
    from analysis_lib.judge.blind import Vocabulary

    assert Blinder(Vocabulary(frozenset({"text"}), frozenset(), frozenset(), frozenset())).text("read the text") == "read the text"


def test_class_order_is_seeded_per_judgement_recorded_and_shown(llm_server, tmp_path, no_keys):
    llm_server.default = answer_for
    trials = [make_trial("text", f"task-{i}", 0, success=False) for i in range(6)]
    run_layer2(trials, None, tmp_path / "out", options(llm_server.url))
    recs = json.loads((tmp_path / "out" / "failure_analyses.json").read_text())["records"]
    orders = [tuple(r["class_order"]) for r in recs]
    assert all(sorted(o) == sorted(CLASSES["failure"]) for o in orders)
    assert len(set(orders)) == 6  # one order per judgement (8! orders: a repeat would be a bug)
    assert len({o[0] for o in orders}) >= 3  # the first class differs between judgements
    for body in llm_server.requests:
        if body["response_format"]["json_schema"]["name"] == "FailureAnalysis":
            text = body["messages"][-1]["content"]
            tid = re.search(r"Task: (\S+)", text).group(1)
            rec = next(r for r in recs if r["task_id"] == tid)
            shown = re.findall(r"^- (\w+): ", text, re.MULTILINE)
            assert shown == rec["class_order"]
    assert class_order("failure", "text/task-0/0") == class_order("failure", "text/task-0/0")
    assert class_order("failure", "x", shuffle=False) == list(CLASSES["failure"])


def test_reported_label_is_the_majority_of_k_samples_all_at_one_temperature(llm_server, tmp_path, no_keys):
    votes = {0: "tool_misuse", 1: "knowledge_gap", 2: "knowledge_gap"}

    def answer(body):
        if body["response_format"]["json_schema"]["name"] == "FailureAnalysis":
            return json.dumps({**FAILURE, "root_cause": votes[body["seed"]], "critical_step": body["seed"]})
        return answer_for(body)

    llm_server.default = answer
    run_layer2(
        [make_trial("text", "task-0", 0, success=False)],
        None,
        tmp_path / "out",
        options(llm_server.url, judge_samples=3, judge_temperature=0.7),
    )
    assert {b["temperature"] for b in llm_server.requests if b["response_format"]["json_schema"]["name"] != "Synthesis"} == {0.7}
    rec = json.loads((tmp_path / "out" / "failure_analyses.json").read_text())["records"][0]
    assert [s["label"] for s in rec["samples"]] == ["tool_misuse", "knowledge_gap", "knowledge_gap"]
    assert rec["result"]["root_cause"] == "knowledge_gap" and rec["result"]["critical_step"] == 1  # sample 1's answer
    md = (tmp_path / "out" / "judge_agreement.md").read_text()
    assert "self, 3 samples at temperature 0.7" in md
    assert majority_label([None, "a", "b", "b", "a"]) == ("a", 1)  # tie: the earliest sample
    assert majority_label([None, None]) == (None, -1)


def test_a_rerun_into_a_new_output_folder_sends_zero_requests(llm_server, tmp_path, no_keys):
    llm_server.default = answer_for
    first = run_layer2(arm_trials(), None, tmp_path / "first", options(llm_server.url))
    assert first["requests"] == llm_server.request_count > 0
    llm_server.reset()
    second = run_layer2(arm_trials(), None, tmp_path / "second", options(llm_server.url))
    assert llm_server.request_count == 0 and second["requests"] == 0 and second["cache_hits"] == first["requests"]
    assert not (tmp_path / "first" / ".llm_cache").exists()  # the answers live in the one shared cache
    assert any(default_cache_dir().rglob("*.json"))


def test_default_cache_location(monkeypatch, tmp_path):
    monkeypatch.setenv("ANALYSIS_LIB_LLM_CACHE", str(tmp_path / "x"))
    assert default_cache_dir() == tmp_path / "x"
    monkeypatch.delenv("ANALYSIS_LIB_LLM_CACHE")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert default_cache_dir() == tmp_path / "xdg" / "analysis_lib" / "llm"
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert default_cache_dir() == tmp_path / "home" / ".cache" / "analysis_lib" / "llm"


# irrCAC's cac.raw4raters (Gwet 2014): 12 units, 4 raters, None = not rated. The R package's
# documentation gives AC1 = 0.7754 (p_a 0.8182, p_e 0.1903).
RAW_4RATERS = [
    [1, 1, None, 1],
    [2, 2, 3, 2],
    [3, 3, 3, 3],
    [3, 3, 3, 3],
    [2, 2, 2, 2],
    [1, 2, 3, 4],
    [4, 4, 4, 4],
    [1, 1, 2, 1],
    [2, 2, 2, 2],
    [None, 5, 5, 5],
    [None, None, 1, 1],
    [None, None, 3, None],
]


def test_gwet_ac1_reproduces_irrcac_documented_value():
    assert gwet_ac1(RAW_4RATERS) == pytest.approx(0.77544, abs=5e-5)


def test_gwet_ac1_two_raters_equals_the_two_rater_formula():
    # Independent computation (Gwet 2008, two raters): p_e = sum_k pi_k (1 - pi_k) / (q - 1), pi_k = (p_ak + p_bk) / 2.
    rng = np.random.default_rng(3)
    a = list(rng.choice(["x", "y", "z"], 60, p=[0.7, 0.2, 0.1]))
    b = [v if rng.random() < 0.7 else rng.choice(["x", "y", "z"]) for v in a]
    p_o = np.mean([x == y for x, y in zip(a, b, strict=True)])
    pi = {k: (a.count(k) + b.count(k)) / 120 for k in "xyz"}
    p_e = sum(p * (1 - p) for p in pi.values()) / 2
    assert gwet_ac1([[x, y] for x, y in zip(a, b, strict=True)]) == pytest.approx((p_o - p_e) / (1 - p_e))


IRRCAC_AC1 = """
import json, sys
import pandas as pd
from irrCAC.raw import CAC
est = CAC(pd.DataFrame(json.load(sys.stdin), columns=list("ABCD"))).gwet()["est"]
print(json.dumps({key: float(est[key]) for key in ("coefficient_value", "pa", "pe")}))
"""


@pytest.mark.slow  # irrCAC's side environment (tests/side_envs.py): built once, 1-2 min and 320 MB
def test_gwet_ac1_matches_the_irrcac_package():
    """irrCAC pins pandas < 3 and scipy 1.12: it runs in a side environment of its own, never in .venv."""
    complete = [u for u in RAW_4RATERS if None not in u]  # irrCAC (Python) counts a missing value as a class
    est = run_json(locked_env("irrCAC"), IRRCAC_AC1, complete)
    # irrCAC 0.4.4 on the 8 complete units (it rounds to 4 and 5 decimals): AC1 0.6743, p_a 0.75, p_e 0.23242.
    assert est == pytest.approx({"coefficient_value": 0.6743, "pa": 0.75, "pe": 0.23242}, abs=1e-12)
    assert gwet_ac1(complete) == pytest.approx(est["coefficient_value"], abs=5e-5)
    assert gwet_ac1(complete) == pytest.approx((est["pa"] - est["pe"]) / (1 - est["pe"]), abs=5e-6)


def test_kappa_and_alpha_match_statsmodels_and_krippendorff():
    from statsmodels.stats.inter_rater import cohens_kappa

    rng = np.random.default_rng(7)
    a = list(rng.integers(0, 4, 80))
    b = [v if rng.random() < 0.6 else int(rng.integers(0, 4)) for v in a]
    table = confusion_matrix(a, b).to_numpy()
    assert table.sum() == 80 and np.trace(table) == sum(x == y for x, y in zip(a, b, strict=True))
    assert cohen_kappa(a, b) == pytest.approx(cohens_kappa(table).kappa)
    import krippendorff as kd  # a test dependency (pyproject's test extra)

    assert krippendorff_alpha_nominal([[x, y] for x, y in zip(a, b, strict=True)]) == pytest.approx(
        kd.alpha(reliability_data=[a, b], level_of_measurement="nominal")
    )


def test_bootstrap_intervals_hold_the_estimate_narrow_with_n_and_failed_are_counted():
    rng = np.random.default_rng(1)

    def labels(n):
        a = list(rng.choice(list("abc"), n))
        return a, [v if rng.random() < 0.8 else rng.choice(list("abc")) for v in a]

    small, big = pair_reliability(*labels(30), reps=300), pair_reliability(*labels(600), reps=300)
    for r in (small, big):
        for name in ("cohen_kappa", "krippendorff_alpha", "gwet_ac1"):
            lo, hi = r[f"{name}_ci"]
            assert lo <= r[name] <= hi
    assert (big["cohen_kappa_ci"][1] - big["cohen_kappa_ci"][0]) < (small["cohen_kappa_ci"][1] - small["cohen_kappa_ci"][0]) / 3
    r = pair_reliability(["a", None, "b", "a"], ["a", "b", None, None], reps=50)
    assert r["units"] == 1 and r["missing_a"] == 1 and r["missing_b"] == 2
    assert bootstrap_ci(lambda us: float("nan"), [1, 2, 3]) == (None, None)
    assert math.isnan(gwet_ac1([["a", "a"], ["a", "a"]]))


def test_human_labels_give_a_contrast_table_beside_the_agreement_table(llm_server, tmp_path, no_keys):
    causes = {"task-0": "tool_misuse", "task-1": "knowledge_gap", "task-2": "tool_misuse", "task-3": "knowledge_gap"}

    def answer(body):
        if body["response_format"]["json_schema"]["name"] == "FailureAnalysis":
            tid = re.search(r"Task: (\S+)", body["messages"][-1]["content"]).group(1)
            return json.dumps({**FAILURE, "root_cause": causes[tid]})
        return answer_for(body)

    llm_server.default = answer
    trials = [make_trial(p, t, 0, success=False) for p in ("plainarm", "graphmcp") for t in causes]
    labels = tmp_path / "human.csv"
    labels.write_text(
        "trial_id,label,analysis\n"
        + "".join(f"{p}/{t}/0,{c},failure\n" for p in ("plainarm", "graphmcp") for t, c in list(causes.items())[:3])
    )
    run_layer2(trials, None, tmp_path / "out", options(llm_server.url, human_labels=str(labels), baseline="plainarm"))
    md = (tmp_path / "out" / "judge_contrasts.md").read_text()
    rows = [line for line in md.splitlines() if line.startswith("| graphmcp - plainarm | tool_misuse")]
    # Both arms: judge 2/4 tool_misuse, humans agree with the judge -> differences 0, PPI interval defined.
    assert len(rows) == 1 and "| 4 / 4 | 3 / 3 |" in rows[0] and rows[0].count("+0.000 [") == 2


def test_contrasts_of_a_study_with_configurations_stay_within_each_configuration(llm_server, tmp_path, no_keys):
    """Each configuration's treatment is contrasted with its own control, never with another configuration's arm."""
    llm_server.default = answer_for
    arms = ["alpha/none", "alpha/skills", "beta/none", "beta/skills"]
    trials = [make_trial(p, f"task-{t}", 0, success=False) for p in arms for t in range(3)]
    pairs = [("alpha/none", "alpha/skills"), ("beta/none", "beta/skills")]
    labels = tmp_path / "human.csv"  # the contrasts are written beside human labels (PPI)
    labels.write_text("trial_id,label,analysis\n" + "".join(f"{p}/task-{t}/0,tool_misuse,failure\n" for p in arms
                                                              for t in range(2)))
    run_layer2(trials, None, tmp_path / "out", options(llm_server.url, baseline="none", pairs=pairs,
                                                        human_labels=str(labels)))
    md = (tmp_path / "out" / "judge_contrasts.md").read_text()
    contrasted = {line.split(" | ")[0].lstrip("| ") for line in md.splitlines() if " - " in line.split(" | ")[0]}
    assert contrasted == {"arm - baseline", "alpha/skills - alpha/none", "beta/skills - beta/none"}
    assert "no contrast" not in md


def test_cli_flags_reach_the_options_and_bad_unblind_names_are_refused():
    from analysis_lib.cli.main import build_parser
    from analysis_lib.judge.run import Layer2Options, plan_jobs

    ns = build_parser().parse_args(
        ["runs", "--judge-temperature", "0.5", "--no-blind", "--unblind-mcp", "--no-shuffle-classes", "--judge-samples", "3"]
    )
    opts = Layer2Options.from_namespace(ns)
    assert (opts.judge_temperature, opts.blind, opts.unblind, opts.shuffle_classes, opts.judge_samples) == (0.5, False, ["mcp"], False, 3)
    defaults = Layer2Options.from_namespace(build_parser().parse_args(["runs"]))
    assert (defaults.judge_temperature, defaults.blind, defaults.unblind, defaults.shuffle_classes) == (0.0, True, None, True)
    with pytest.raises(ValueError, match="unknown analyses: nope"):
        plan_jobs(arm_trials(), None, Layer2Options(unblind=["nope"]))


def test_a_two_rater_label_csv_feeds_the_judge_with_the_first_rater(tmp_path):
    from analysis_lib.judge.labels import load_human_labels_csv

    p = tmp_path / "labels.csv"
    p.write_text(
        "trial_id,analysis,rater,label\na/t/0,failure,ann,tool_misuse\na/t/0,failure,bob,knowledge_gap\na/u/0,strategy,bob,chaotic\n"
    )
    assert load_human_labels_csv(p) == {("failure", "a/t/0"): "tool_misuse"}
