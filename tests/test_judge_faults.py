"""The judge against a loopback server with injected faults: a budget that is a cap at concurrency 4, a response
that never ends, ``Retry-After`` on 429, and a run whose judgements all fail (a real ``python -m analysis_lib``)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from builders import small_runs
from judge_fakes import STRATEGY, answer_for, make_trials
from llm_server import Drip, Fail, Reply, prompt_text
from test_judge_run import options

from analysis_lib.judge.cache import ResponseCache
from analysis_lib.judge.client import JudgeClient, Ledger
from analysis_lib.judge.run import JUDGEMENTS_FAILED_EXIT, run_layer2
from analysis_lib.judge.schemas import StrategyAnalysis
from analysis_lib.metrics.pricing import register_price

ROOT = Path(__file__).resolve().parents[1]
PRICE_IN, PRICE_OUT = 2e-6, 8e-6  # USD per token of the priced loopback judge below


def _billing_server(srv, bills: list[float]) -> None:
    """Every answer billed at the most its request allows: a prompt token per byte of text (a byte-level
    tokenizer's maximum) and an answer as long as ``max_tokens``. ``bills`` gets what each answer cost."""
    lock = threading.Lock()

    def answer(body: dict) -> Reply:
        prompt = len(prompt_text(body).encode())
        completion = int(body["max_tokens"])
        with lock:
            bills.append(prompt * PRICE_IN + completion * PRICE_OUT)
        return Reply(answer_for(body), prompt_tokens=prompt, completion_tokens=completion, latency=0.2)

    srv.default = answer


def test_the_budget_is_a_cap_with_four_calls_in_flight(llm_server, tmp_path, no_keys):
    model = "openai/capped-loopback-judge"
    register_price(model, PRICE_IN, PRICE_OUT)
    bills: list[float] = []
    _billing_server(llm_server, bills)
    budget = 0.12  # room for about nine of the sixteen judgements' worst cases
    summary = run_layer2(make_trials(3), None, tmp_path, options(llm_server.url, model=model, budget_usd=budget, concurrency=4,
                                                                max_tokens=1000))
    # Four requests really were in flight at once, and the budget really bound: some judgements were not asked.
    assert llm_server.max_in_flight == 4
    assert 0 < llm_server.request_count < 16 and summary["budget_stopped"] == 16 - llm_server.request_count
    # What the server billed never passes the budget, and the run log states exactly that spend.
    assert sum(bills) <= budget
    assert summary["spent_usd"] == pytest.approx(sum(bills), rel=1e-9)
    assert summary["unsettled_usd"] == 0 and summary["overrun_usd"] == 0
    assert 0 < summary["reserved_peak_usd"] <= budget
    assert f"of the {budget:g} USD budget" in summary["spend"] and "reserved its worst case" in summary["spend"]
    # Each judgement left out was left out because its worst case did not fit beside what was spent.
    stop = next(f["error"] for f in summary["failed_analyses"] if f["error"].startswith("budget stop"))
    worst = float(stop.split("worst-case cost (")[1].split(" USD")[0])
    committed = float(stop.split("the spend (")[1].split(" USD")[0])
    assert worst + committed > budget
    assert summary["judgements_failed"] == 0  # not asked is not failed


def test_a_response_that_never_ends_is_cut_at_the_deadline(llm_server, tmp_path):
    """Headers, then one byte every 0.25 s for a minute: the socket timeout never fires; the deadline does."""
    llm_server.script(Drip(interval=0.25, seconds=60))
    client = JudgeClient("openai/loopback-judge", api_base=llm_server.url, api_key="k", cache=ResponseCache(tmp_path / "c"),
                         timeout=30, deadline=1.5, max_retries=0)
    r = _one(client)
    assert not r.ok and r.error == "request failed: gave up after 1 attempts: no complete answer within the 1.5 s deadline"
    # The client hung up on the server (which would have gone on dripping for a minute), not the other way round.
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline and not llm_server.drips[0]["client_hung_up"]:
        time.sleep(0.05)
    assert llm_server.drips[0]["client_hung_up"] is True
    assert client.ledger.requests == 1


def test_retry_after_on_429_is_waited_for_and_a_longer_one_ends_the_judgement(llm_server, tmp_path):
    llm_server.script(Fail(429, headers={"Retry-After": "2"}), Fail(429, headers={"retry-after-ms": "1500"}),
                      Reply(json.dumps(STRATEGY)))
    client = JudgeClient("openai/loopback-judge", api_base=llm_server.url, api_key="k", cache=ResponseCache(tmp_path / "c"),
                         backoff_sec=0.01)
    r = _one(client)
    assert r.ok and r.data == STRATEGY and client.ledger.retries == 2
    gaps = [b - a for a, b in zip(llm_server.arrivals, llm_server.arrivals[1:], strict=False)]
    assert gaps[0] >= 2.0 and gaps[1] >= 1.5  # not the 0.01 s backoff

    llm_server.reset()
    llm_server.script(Fail(429, headers={"Retry-After": "3600"}))
    client = JudgeClient("openai/loopback-judge", api_base=llm_server.url, api_key="k", cache=ResponseCache(tmp_path / "d"),
                         max_retry_after_sec=60)
    r = _one(client, sample=1)
    assert not r.ok and "rate limited: the server asks to retry after 3600 s, more than the 60 s this client waits" in r.error
    assert llm_server.request_count == 1


def test_a_budget_with_an_unpriced_judge_is_refused(tmp_path):
    with pytest.raises(ValueError, match="no price for openai/unpriced-judge, so a budget cannot be kept"):
        JudgeClient("openai/unpriced-judge", ledger=Ledger(budget_usd=1.0))


@pytest.mark.slow  # a real `python -m analysis_lib` (imports litellm) against the loopback server
def test_an_analysis_whose_judgements_all_fail_exits_non_zero_and_says_how_many(llm_server, tmp_path):
    runs = small_runs(tmp_path / "runs")
    llm_server.default = Fail(400, "model not found")  # final for each judgement, no retry
    env = {k: v for k, v in os.environ.items() if not any(w in k.upper() for w in ("KEY", "TOKEN", "SECRET"))}
    env.update(PYTHONPATH=str(ROOT), ANALYSIS_LIB_LLM_CACHE=str(tmp_path / "llm-cache"))
    proc = subprocess.run([sys.executable, "-m", "analysis_lib", str(runs), "--llm-only", "--api-base", llm_server.url,
                           "--model", "openai/loopback-judge", "-o", str(tmp_path / "out"), "-q"],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == JUDGEMENTS_FAILED_EXIT, proc.stderr
    n = llm_server.request_count
    assert n > 0
    assert f"error: {n} of {n} LLM judgements failed" in proc.stderr
    summary = json.loads((tmp_path / "out" / "layer2_summary.json").read_text())
    assert summary["judgements_failed"] == n == len(summary["failed_analyses"])


def _one(client: JudgeClient, sample: int = 0):
    variables = {"task_id": "t", "profile": "p", "outcome": "failure", "trajectory": "[step 1] agent", "shown_steps": 1,
                 "total_steps": 1, "classes": "- a: b"}
    return client.judge_many([lambda: client.judge("strategy", variables, StrategyAnalysis, sample)])[0]
