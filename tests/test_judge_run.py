"""Layer 2 end to end against a real OpenAI-compatible server on 127.0.0.1 (tests/llm_server.py)."""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path

import pytest
from judge_fakes import FAILURE, STRATEGY, answer_for, make_trials
from llm_server import Fail, Raw, Reply

from analysis_lib.judge.cache import ResponseCache
from analysis_lib.judge.client import JudgeClient
from analysis_lib.judge.run import layer2_frames, load_layer2_outputs, records_df, run_layer2
from analysis_lib.judge.schemas import StrategyAnalysis
from analysis_lib.metrics.pricing import register_price

STABLE_OUTPUTS = [
    "strategy_analysis.json", "failure_analyses.json", "mcp_utilization.json",
    "comparative_narratives.md", "synthesis.md", "paper_snippets.md",
]


def options(url: str | None, **kw) -> argparse.Namespace:
    base = dict(
        model="openai/loopback-judge", api_base=url, budget_usd=None, concurrency=4, refresh=False, judge_samples=1,
        judge_model_b=None, human_labels=None, estimate_cost=False, quiet=True, seed=0, simulated=False,
        baseline="text",  # the study's baseline, as the command line hands it over
    )
    base.update(kw)
    return argparse.Namespace(**base)


def test_each_analysis_is_asked_with_its_schema_and_written(llm_server, tmp_path, no_keys):
    llm_server.default = answer_for
    trials = make_trials(3)
    out = tmp_path / "out"
    summary = run_layer2(trials, None, out, options(llm_server.url, simulated=True))
    # 6 strategy + 3 failure (text/task-0, text/task-1, codegraph/task-1) + 3 mcp + 3 comparative + 1 synthesis
    assert summary["requests"] == 16 and summary["cache_hits"] == 0 and summary["failed_analyses"] == []
    names = [b["response_format"]["json_schema"]["name"] for b in llm_server.requests]
    assert sorted(set(names)) == ["ComparativeNarrative", "FailureAnalysis", "MCPUtilization", "StrategyAnalysis", "Synthesis"]
    assert all(b["response_format"]["type"] == "json_schema" for b in llm_server.requests)
    assert names[-1] == "Synthesis"  # asked last, with the other results in its prompt
    assert "root_cause), text: premature_termination 2" in llm_server.requests[-1]["messages"][-1]["content"]

    res = load_layer2_outputs(out)
    strat = res["strategy"]
    assert strat["n_units"] == 6 and strat["n_ok"] == 6 and strat["simulated"] is True and "SIMULATED" in strat["notice"]
    assert strat["records"][0]["result"] == STRATEGY
    assert {r["trial_id"] for r in res["failure"]["records"]} == {"text/task-0/0", "text/task-1/0", "codegraph/task-1/0"}
    assert res["failure"]["records"][0]["result"] == FAILURE
    assert {r["profile"] for r in res["mcp"]["records"]} == {"codegraph"}
    assert "## task-1" in res["comparative_md"] and "**Winner:** codegraph" in res["comparative_md"]
    assert "SIMULATED" in res["synthesis_md"] and "codegraph solved more tasks" in res["paper_snippets_md"]
    assert res["agreement_md"] is None  # one sample, one judge, no human labels
    assert res["summary"]["requests"] == 16
    df = records_df(res["strategy"])
    assert len(df) == 6 and "result.primary_strategy" in df.columns
    cond = strat["condensation"]
    assert cond["trajectories"] == 6 and 0 < cond["ratio"] < 1
    frames = layer2_frames(res)
    assert frames["strategy"].to_dict("records") == [
        {"profile": "codegraph", "primary_strategy": "grep_and_fix", "trials": 3},
        {"profile": "text", "primary_strategy": "grep_and_fix", "trials": 3},
    ]
    assert frames["failure"]["trials"].sum() == 3
    assert frames["mcp"].to_dict("records") == [{
        "profile": "codegraph", "mean_utilization_quality": 0.8, "mean_dependency_leverage": 0.6,
        "mean_search_effectiveness": 0.5, "init_early": 3,
    }]
    assert frames["failed"].empty


def test_second_run_is_served_from_the_cache_with_identical_outputs_and_refresh_bypasses_it(llm_server, tmp_path, no_keys):
    llm_server.default = answer_for
    trials = make_trials(3)
    out = tmp_path / "out"
    first = run_layer2(trials, None, out, options(llm_server.url))
    before = {n: (out / n).read_bytes() for n in STABLE_OUTPUTS}
    llm_server.reset()
    second = run_layer2(trials, None, out, options(llm_server.url))
    assert llm_server.request_count == 0 and second["requests"] == 0
    assert second["cache_hits"] == first["requests"] == 16
    assert {n: (out / n).read_bytes() for n in STABLE_OUTPUTS} == before
    third = run_layer2(trials, None, out, options(llm_server.url, refresh=True))
    assert llm_server.request_count == 16 and third["cache_hits"] == 0


def test_budget_stop_when_the_next_worst_case_does_not_fit(llm_server, tmp_path, no_keys):
    # 1e-6 USD per token in and out; each answer reports 100 + 20 tokens -> 0.00012 USD per call, while each
    # call reserves its worst case first: its prompt (a token per byte) and a 50-token answer, about 0.003 USD.
    model = "openai/priced-loopback-judge"
    register_price(model, 1e-6, 1e-6)
    llm_server.default = answer_for
    budget = 0.0045
    summary = run_layer2(make_trials(3), None, tmp_path, options(llm_server.url, model=model, budget_usd=budget, concurrency=1,
                                                                max_tokens=50))
    sent = llm_server.request_count
    assert 0 < sent < 16 and summary["budget_stopped"] == 16 - sent
    assert summary["spent_usd"] == pytest.approx(sent * 0.00012) and sent * 0.00012 <= budget
    assert summary["budget_stop"].startswith(f"budget stop: {16 - sent} judgements not asked, as their worst case did not fit; "
                                             f"spent {sent * 0.00012:.4f} USD of the 0.0045 USD budget")
    failed = {f["error"].split(":")[0] for f in summary["failed_analyses"]}
    assert failed == {"budget stop"} and summary["judgements_failed"] == 0
    stop = summary["failed_analyses"][0]["error"]
    worst, committed = float(stop.split("worst-case cost (")[1].split(" USD")[0]), float(stop.split("the spend (")[1].split(" USD")[0])
    assert worst + committed > budget  # it was left out because it could not fit
    strat = json.loads((tmp_path / "strategy_analysis.json").read_text())
    assert strat["n_ok"] >= 1 and strat["cost_usd"] == pytest.approx(strat["n_ok"] * 0.00012)  # spend recorded in the outputs
    # Nothing skipped was cached: with a bigger budget the rest is asked, the first ones are hits.
    llm_server.reset()
    again = run_layer2(make_trials(3), None, tmp_path, options(llm_server.url, model=model, budget_usd=10.0, concurrency=1,
                                                              max_tokens=50))
    assert again["cache_hits"] == sent and llm_server.request_count == 16 - sent and again["failed_analyses"] == []


def _client(url, tmp_path, **kw) -> JudgeClient:
    kw.setdefault("backoff_sec", 0.01)
    return JudgeClient("openai/loopback-judge", api_base=url, api_key="k", cache=ResponseCache(tmp_path / "c"), **kw)


def _one(client, schema=StrategyAnalysis, sample=0):
    variables = {
        "task_id": "t",
        "profile": "p",
        "outcome": "failure",
        "trajectory": "[step 1] agent",
        "shown_steps": 1,
        "total_steps": 1,
        "classes": "- a: b",
    }
    tpl = "strategy" if schema is StrategyAnalysis else "failure"
    return client.judge_many([lambda: client.judge(tpl, variables, schema, sample)])[0]


def test_retries_on_429_500_and_broken_bodies_then_succeeds(llm_server, tmp_path):
    llm_server.script(Fail(429), Fail(500), Fail(503), Raw(b"{not json"), Reply(json.dumps(STRATEGY)))
    client = _client(llm_server.url, tmp_path)
    r = _one(client)
    assert r.ok and r.data == STRATEGY
    assert llm_server.request_count == 5 and client.ledger.retries == 4


def test_gives_up_after_max_retries_with_a_reason(llm_server, tmp_path):
    llm_server.default = Fail(500)
    client = _client(llm_server.url, tmp_path, max_retries=2)
    r = _one(client)
    assert not r.ok and "gave up after 3 attempts" in r.error and "InternalServerError" in r.error
    assert llm_server.request_count == 3
    assert not any((tmp_path / "c").rglob("*.json"))  # transient failures are not cached


def test_timeout_is_retried(llm_server, tmp_path):
    llm_server.script(Reply(json.dumps(STRATEGY), latency=1.5), Reply(json.dumps(STRATEGY)))
    client = _client(llm_server.url, tmp_path, timeout=0.5)
    r = _one(client)
    assert r.ok and client.ledger.retries == 1


def test_one_repair_attempt_then_success(llm_server, tmp_path):
    llm_server.script(Reply('{"primary_strategy": "guessing"}'), Reply(json.dumps(STRATEGY)))
    client = _client(llm_server.url, tmp_path)
    r = _one(client)
    assert r.ok and r.repaired and r.data == STRATEGY
    repair_turn = llm_server.requests[1]["messages"]
    assert repair_turn[-2] == {"role": "assistant", "content": '{"primary_strategy": "guessing"}'}
    assert "primary_strategy" in repair_turn[-1]["content"] and "could not be used" in repair_turn[-1]["content"]
    assert r.prompt_tokens == 200  # usage of both calls is counted


def test_schema_failure_after_repair_is_a_failed_record_and_the_rest_goes_on(llm_server, tmp_path, no_keys):
    llm_server.default = answer_for
    llm_server.on("Task: task-2\nProfile (agent configuration): text", Reply("I think it was grep and fix."))
    summary = run_layer2(make_trials(3), None, tmp_path, options(llm_server.url, blind=False))
    failed = summary["failed_analyses"]
    assert [(f["analysis"], f["unit"]) for f in failed] == [("strategy", "text/task-2/0")]
    assert "schema validation failed after one repair attempt" in failed[0]["error"]
    strat = json.loads((tmp_path / "strategy_analysis.json").read_text())
    assert strat["n_ok"] == 5 and strat["n_failed"] == 1
    bad = next(r for r in strat["records"] if not r["ok"])
    assert bad["result"] is None and "Invalid JSON" in bad["error"]


def test_http_400_for_one_trajectory_does_not_stop_the_others(llm_server, tmp_path, no_keys):
    llm_server.default = answer_for
    llm_server.on("Task: task-0\nProfile (agent configuration): codegraph", Fail(400, "context length exceeded"))
    summary = run_layer2(make_trials(3), None, tmp_path, options(llm_server.url, blind=False))
    units = sorted((f["analysis"], f["unit"]) for f in summary["failed_analyses"])
    assert units == [("mcp", "codegraph/task-0/0"), ("strategy", "codegraph/task-0/0")]
    assert "BadRequestError" in summary["failed_analyses"][0]["error"]
    assert (tmp_path / "synthesis.md").is_file()


def test_concurrency_bound_is_respected(llm_server, tmp_path, no_keys):
    llm_server.default = answer_for
    llm_server.latency = 0.15
    run_layer2(make_trials(4), None, tmp_path, options(llm_server.url, concurrency=3))
    n = llm_server.request_count  # 8 strategy + 3 failure + 4 mcp + 4 comparative + 1 synthesis
    assert n == 20
    # the server counts requests in flight: the bound was reached (each answer takes 0.15 s) and never passed
    assert llm_server.max_in_flight == 3


def test_no_key_and_no_api_base_skips_with_a_reason(llm_server, tmp_path, no_keys, capsys):
    out = tmp_path / "out"
    summary = run_layer2(make_trials(2), None, out, options(None, model="openrouter/openai/gpt-5.2"))
    assert summary["skipped"].startswith("Layer 2 skipped: no API key for openrouter/openai/gpt-5.2")
    assert "OPENROUTER_API_KEY" in summary["skipped"]
    assert summary["requests"] == 0 and llm_server.request_count == 0
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [summary["skipped"]]
    assert sorted(p.name for p in out.iterdir()) == ["layer2_summary.json"]


def test_key_from_dotenv_is_used_but_never_written(llm_server, tmp_path, no_keys, monkeypatch):
    secret = "sk-test-DO-NOT-LEAK-0123456789"
    (tmp_path / ".env").write_text(f"OPENAI_API_KEY={secret}\n")
    llm_server.default = answer_for
    # An error body that echoes the key back must not carry it into the outputs either.
    llm_server.on("Task: task-1\nProfile (agent configuration): text", Fail(401, f"invalid key {secret}"))
    out = tmp_path / "out"
    summary = run_layer2(make_trials(2), None, out, options(llm_server.url, blind=False))
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)  # load_dotenv put it into the environment
    assert any(h.get("authorization") == f"Bearer {secret}" for h in llm_server.headers)
    assert summary["failed_analyses"] and "***" in summary["failed_analyses"][0]["error"]
    cache = Path(os.environ["ANALYSIS_LIB_LLM_CACHE"])
    files = [p for p in [*out.rglob("*"), *cache.rglob("*")] if p.is_file()]
    assert any(p.is_relative_to(cache) for p in files)
    for p in files:
        assert secret not in p.read_text(errors="replace"), p
    assert secret not in json.dumps(summary)


def test_estimate_cost_sends_nothing_and_prices_known_models(llm_server, tmp_path, capsys, no_keys):
    out = tmp_path / "out"
    s = run_layer2(make_trials(3), None, out, options(None, model="openrouter/openai/gpt-5.2", estimate_cost=True))
    assert llm_server.request_count == 0
    text = capsys.readouterr().out
    assert "strategy" in text and "synthesis" in text and "total" in text
    rows = {r["analysis"]: r for r in s["estimate"]["rows"]}
    assert rows["strategy"]["calls"] == 6 and rows["failure"]["calls"] == 3 and rows["synthesis"]["calls"] == 1
    assert s["estimate"]["total"]["cost_usd"] > 0
    s2 = run_layer2(make_trials(3), None, out, options(None, model="openai/unpriced-model", estimate_cost=True, judge_samples=3))
    assert s2["estimate"]["total"]["cost_usd"] is None and "unknown" in capsys.readouterr().out
    assert {r["analysis"]: r["calls"] for r in s2["estimate"]["rows"]}["strategy"] == 18


def test_samples_second_judge_and_human_labels_give_agreement_table(llm_server, tmp_path, no_keys):
    # Judge A answers by sample seed: sample 1 of text/task-0 disagrees; judge B always says knowledge_gap.
    def answer(body):
        name = body["response_format"]["json_schema"]["name"]
        text = body["messages"][-1]["content"]
        if name == "FailureAnalysis":
            if body["model"] == "judge-b":
                return json.dumps({**FAILURE, "root_cause": "knowledge_gap"})
            if body.get("seed") == 1 and "Task: task-0" in text:
                return json.dumps({**FAILURE, "root_cause": "tool_misuse"})
        return answer_for(body)

    llm_server.default = answer
    labels = tmp_path / "human.csv"
    labels.write_text("trial_id,label,analysis\ntext/task-0/0,premature_termination,failure\ntext/task-1/0,knowledge_gap,failure\n")
    opts = options(llm_server.url, judge_samples=2, judge_model_b="openai/judge-b", human_labels=str(labels))
    summary = run_layer2(make_trials(3), None, tmp_path, opts)
    assert summary["failed_analyses"] == []
    md = (tmp_path / "judge_agreement.md").read_text()
    rows = {
        tuple(c.strip() for c in line.split("|")[1:3]): [c.strip() for c in line.split("|")[3:-1]]
        for line in md.splitlines()
        if line.startswith("| failure")
    }
    # Self: 3 failed trials, 2 of 3 with both samples equal; both samples at temperature 0.
    self_row = rows[("failure (root_cause)", "self, 2 samples at temperature 0")]
    assert self_row[0] == "3" and self_row[1] == "0 / -" and self_row[2] == "0.667"
    assert {b.get("temperature") for b in llm_server.requests} == {0.0}
    # A vs B: A always premature_termination, B always knowledge_gap -> 0 % agreement, kappa 0 (p_e = 0).
    ab = rows[("failure (root_cause)", "judge A vs judge B (openai/judge-b)")]
    assert ab[0] == "3" and ab[2] == "0.000" and ab[3].startswith("0.000")
    # Human: 2 labelled trials, A agrees on 1 -> 50 %; kappa = (0.5 - 0.5) / (1 - 0.5) = 0.
    hu = rows[("failure (root_cause)", "judge vs human labels")]
    assert hu[0] == "2" and hu[2] == "0.500" and hu[3].startswith("0.000")
    fail = json.loads((tmp_path / "failure_analyses.json").read_text())
    rec = next(r for r in fail["records"] if r["trial_id"] == "text/task-0/0")
    assert [s["label"] for s in rec["samples"]] == ["premature_termination", "tool_misuse"]
    assert rec["model_b"]["result"]["root_cause"] == "knowledge_gap"


def test_a_run_that_stopped_part_way_resumes_from_the_cache(llm_server, tmp_path, no_keys):
    # First run: the judge is unreachable for task-2's trajectories (a final 400), so those are missing.
    llm_server.default = answer_for
    llm_server.on("Task: task-2\nProfile (agent configuration)", Fail(400, "server gone"))
    first = run_layer2(make_trials(3), None, tmp_path, options(llm_server.url))
    assert len(first["failed_analyses"]) == 3  # strategy x2, mcp (codegraph)
    # Second run: only the three missing judgements and the synthesis (whose input changed) are sent.
    llm_server._rules.clear()
    llm_server.reset()
    second = run_layer2(make_trials(3), None, tmp_path, options(llm_server.url))
    assert second["failed_analyses"] == [] and llm_server.request_count == 4 and second["cache_hits"] == 12


def test_a_key_given_to_the_client_is_redacted_from_errors(llm_server, tmp_path):
    secret = "sk-explicit-client-key-987654321"
    llm_server.default = Fail(403, f"key {secret} is not allowed")
    client = JudgeClient("openai/loopback-judge", api_base=llm_server.url, api_key=secret, cache=ResponseCache(tmp_path))
    r = _one(client)
    assert not r.ok and "***" in r.error and secret not in r.error and secret not in repr(client)
