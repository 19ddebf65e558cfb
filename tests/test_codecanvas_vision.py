"""CodeCanvas vision analysis: image downscaling and the judge call against the loopback server."""

from __future__ import annotations

import base64
import io
import json
import os

import pytest
from llm_server import LLMServer, Reply, prompt_text
from PIL import Image
from test_codecanvas import HAND_CALLS, HAND_STATE, HAND_TESTS, _trial

from analysis_lib import codecanvas as cc
from analysis_lib.core.trial import InputError
from analysis_lib.judge import vision
from analysis_lib.judge.cache import ResponseCache
from analysis_lib.judge.client import JudgeClient

API_KEY = "sk-test-secret-0123456789"


def _png(path, size, color=(20, 120, 200)):
    Image.new("RGB", size, color).save(path)


# ---------------------------------------------------------------------------------------------
# downscaling
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "size, expected",
    [
        ((800, 600), (800, 600)),  # within both limits: untouched, never upscaled
        ((3136, 1000), (1568, 500)),  # long side: scale 1568/3136 = 0.5; 784,000 px <= 1.15 MP
        # pixels bind: min(1568/3000 = 0.5227, sqrt(1,150,000 / 6,000,000) = 0.4378) = 0.4378
        # -> int(3000 * 0.4378) = 1313, int(2000 * 0.4378) = 875
        ((3000, 2000), (1313, 875)),
        ((1200, 1200), (1072, 1072)),  # sqrt(1,150,000 / 1,440,000) = 0.8937 -> 1072
        ((10000, 5), (1568, 1)),  # thin images keep at least one pixel
    ],
)
def test_fit_size(size, expected):
    assert vision.fit_size(*size) == expected


def test_prepare_image_downscales_and_reencodes(tmp_path):
    _png(tmp_path / "big.png", (3136, 1000))
    im = vision.prepare_image(tmp_path / "big.png")
    assert (im.width, im.height, im.original_width, im.original_height) == (1568, 500, 3136, 1000)
    assert Image.open(io.BytesIO(im.png)).size == (1568, 500)
    assert im.name == "big"
    small = vision.prepare_image(tmp_path / "big.png", max_side=100, max_pixels=10**9)
    assert (small.width, small.height) == (100, 31)  # 1000 * 100/3136 = 31.9 -> 31
    part = vision.image_part(small)
    assert part["type"] == "image_url" and part["image_url"]["url"].startswith("data:image/png;base64,")


def test_prepare_image_refuses_non_images_with_one_line(tmp_path):
    bad = tmp_path / "impact_A1.png"
    bad.write_bytes(b"not a png at all")
    with pytest.raises(InputError) as info:
        vision.prepare_image(bad)
    assert str(bad) in str(info.value) and "not a readable image" in str(info.value)
    assert "\n" not in str(info.value)


# ---------------------------------------------------------------------------------------------
# the call, through the judge client, against a real loopback HTTP server
# ---------------------------------------------------------------------------------------------

IMPACT = {"alignment_score": 0.8, "aligned_edits": ["src/pkg/a.py"], "outside_edits": ["README.md"],
          "missed_dependencies": [], "visual_understanding": "high", "observations": ["edits follow the graph"]}
BOARD = {"board_quality_score": 0.6, "reasoning_style": "hypothesis_driven", "evidence_to_claim_linkage": 0.7,
         "claim_to_decision_linkage": 0.5, "strengths": ["cites evidence"], "weaknesses": [], "key_insight": "ok"}
ARCH = {"architecture_understanding": 0.7, "relevant_modules_explored": ["pkg"], "irrelevant_exploration": [],
        "missed_modules": [], "edit_appropriateness": 0.9, "observations": []}


def _answers(srv: LLMServer) -> None:
    srv.on("impact views the agent saw", Reply(IMPACT))
    srv.on("The attached image is the board", Reply(BOARD))
    srv.on("architecture view of the repository", Reply(ARCH))


def _images_of(body: dict) -> list[Image.Image]:
    out = []
    for msg in body["messages"]:
        if isinstance(msg["content"], list):
            for part in msg["content"]:
                if part.get("type") == "image_url":
                    url = part["image_url"]["url"]
                    assert url.startswith("data:image/png;base64,")
                    out.append(Image.open(io.BytesIO(base64.b64decode(url.split(",", 1)[1]))))
    return out


@pytest.fixture
def canvas_trial(tmp_path):
    state = json.loads(json.dumps(HAND_STATE))
    state["analyses"].append({"id": "A3", "target": "pkg.d:k", "affected": [], "png_path": "../../etc/passwd"})
    trial = _trial(tmp_path, state, HAND_CALLS, HAND_TESTS)
    sdir = cc.session_dir_of(trial)
    _png(sdir / "architecture.png", (300, 200))
    _png(sdir / "board.png", (3136, 1000))  # must arrive downscaled to 1568 x 500
    _png(sdir / "impact_A1.png", (400, 300))
    _png(sdir / "impact_A2.png", (640, 480))
    return trial


def test_vision_call_sends_downscaled_images_and_parses_answers(canvas_trial, tmp_path):
    with LLMServer() as srv:
        _answers(srv)
        client = JudgeClient("openai/loopback-model", api_base=srv.url, api_key=API_KEY,
                             cache=ResponseCache(tmp_path / "cache"), concurrency=2, max_retries=0)
        results = vision.run_vision([canvas_trial], client)
        bodies = {b: body for body in srv.requests for b in ("impact", "board", "architecture")
                  if {"impact": "impact views", "board": "The attached image is the board",
                      "architecture": "architecture view"}[b] in prompt_text(body)}
        assert srv.request_count == 3

    # the image content reached the request body, downscaled, with the facts as text
    assert [im.size for im in _images_of(bodies["board"])] == [(1568, 500)]
    assert [im.size for im in _images_of(bodies["impact"])] == [(400, 300), (640, 480)]
    assert [im.size for im in _images_of(bodies["architecture"])] == [(300, 200)]
    impact_text = prompt_text(bodies["impact"])
    assert "- src/pkg/a.py" in impact_text and "- README.md" in impact_text  # edits, canonical paths
    assert "- /app/src/pkg/c.py" in impact_text  # blast radius file
    assert "A1: target pkg.a:f; affected pkg.b:g, pkg.c:h" in impact_text
    assert "C3 [question] does h too? (evidence: E9)" in prompt_text(bodies["board"])
    assert "- src/pkg/e.py" in prompt_text(bodies["architecture"])  # files read
    # the response schema travels with every request
    for body in bodies.values():
        assert body["response_format"]["type"] == "json_schema"
    assert "visual_understanding" in json.dumps(bodies["impact"]["response_format"])
    # no request ever carries the passwd path's content or the session's absolute path
    assert all("root:x:0:0" not in json.dumps(b) for b in bodies.values())

    res = results[canvas_trial.trial_path]
    assert res["impact_alignment"]["alignment_score"] == 0.8
    assert res["impact_alignment"]["visual_understanding"] == "high"
    assert res["board_quality"]["board_quality_score"] == 0.6
    assert res["board_quality"]["reasoning_style"] == "hypothesis_driven"
    assert res["architecture_understanding"]["edit_appropriateness"] == 0.9
    assert any("'../../etc/passwd' points outside the session folder; refused" in e for e in res["errors"])
    assert {c["analysis"] for c in res["calls"]} == {"impact_alignment", "board_quality", "architecture_understanding"}
    assert {"name": "board", "width": 1568, "height": 500, "original_width": 3136, "original_height": 1000}.items() <= next(
        im for im in res["images"] if im["name"] == "board").items()

    frame = vision.vision_frame(results)
    assert frame.loc[0, "reasoning_style"] == "hypothesis_driven" and frame.loc[0, "alignment_score"] == 0.8

    # cached: a second run sends nothing and gives the same answers; the key is in no cache file
    with LLMServer() as srv2:
        client2 = JudgeClient("openai/loopback-model", api_base=srv2.url, api_key=API_KEY,
                              cache=ResponseCache(tmp_path / "cache"), concurrency=2)
        again = vision.run_vision([canvas_trial], client2, batch=1)  # batching changes nothing
        assert srv2.request_count == 0
    for analysis in vision.RESPONSE_MODELS:
        assert again[canvas_trial.trial_path][analysis] == res[analysis]
    assert all(c["cached"] for c in again[canvas_trial.trial_path]["calls"])
    for root, _dirs, files in os.walk(tmp_path / "cache"):
        for name in files:
            assert API_KEY not in open(os.path.join(root, name), encoding="utf-8").read()

    # the results flow into codecanvas_analysis.json
    out = cc.write_codecanvas_outputs([canvas_trial], None, tmp_path / "out", simulated=False, vision=results)
    doc = json.loads(out["codecanvas_analysis.json"].read_text())
    assert doc["runs"][0]["vision"]["board_quality"]["reasoning_style"] == "hypothesis_driven"
    assert API_KEY not in out["codecanvas_analysis.json"].read_text()


def test_a_failed_analysis_does_not_stop_the_others(canvas_trial, tmp_path):
    with LLMServer() as srv:
        _answers(srv)
        srv._rules.insert(0, ("The attached image is the board", Reply("this is not json")))
        client = JudgeClient("openai/loopback-model", api_base=srv.url, api_key=API_KEY, concurrency=1, max_retries=0)
        res = vision.run_vision([canvas_trial], client)[canvas_trial.trial_path]
        assert srv.request_count == 4  # 3 analyses + 1 repair turn for the board
    assert res["board_quality"] is None
    assert any(e.startswith("board_quality: schema validation failed") for e in res["errors"])
    assert res["impact_alignment"]["alignment_score"] == 0.8


def test_trials_without_state_or_images(tmp_path):
    plain = _trial(tmp_path, None, HAND_CALLS, HAND_TESTS, name="plain", profile="text")
    no_images = _trial(tmp_path, HAND_STATE, HAND_CALLS, HAND_TESTS, name="noimg")
    broken = _trial(tmp_path, "{", HAND_CALLS, HAND_TESTS, name="broken")
    with LLMServer() as srv:
        client = JudgeClient("openai/loopback-model", api_base=srv.url, api_key=API_KEY)
        results = vision.run_vision([plain, no_images, broken], client)
        assert srv.request_count == 0
    assert plain.trial_path not in results
    assert results[no_images.trial_path]["has_images"] is False
    assert "truncated JSON" in results[broken.trial_path]["errors"][0]


# ---------------------------------------------------------------------------------------------
# the command line, as a user runs it (real subprocess, real loopback server)
# ---------------------------------------------------------------------------------------------


@pytest.mark.slow  # a fresh interpreter imports litellm: ~10-30 s on 2 busy cores
def test_cli_writes_outputs_with_vision_and_survives_a_broken_state(sample_runs, tmp_path):
    import shutil
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    sample = sample_runs
    run = next(p for p in sorted(sample.iterdir()) if p.name.endswith("__codecanvas"))
    with_state = [t for t in sorted(run.iterdir()) if (t / "agent/sessions/codecanvas/state.json").exists()][:2]
    runs = tmp_path / "runs"
    for t in with_state:
        shutil.copytree(t, runs / run.name / t.name)
    broken = runs / run.name / with_state[1].name / "agent/sessions/codecanvas/state.json"
    broken.write_text('{"evidence": [')
    out = tmp_path / "out"
    with LLMServer() as srv:
        _answers(srv)
        env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
        proc = subprocess.run(
            [sys.executable, "-m", "analysis_lib", "codecanvas", str(runs), "-o", str(out), "--vision",
             "--model", "openai/loopback-model", "--api-base", srv.url, "--llm-cache-dir", str(tmp_path / "cache")],
            cwd=root, env=env, capture_output=True, text=True, timeout=120,
        )
        sent = srv.request_count
    assert proc.returncode == 0, proc.stderr
    # one line naming the broken file (relative to the runs folder), then the summary line
    assert f"{run.name}/{with_state[1].name}/agent/sessions/codecanvas/state.json: truncated JSON" in proc.stderr
    assert "codecanvas: 2 trials, 1 with CodeCanvas state, 1 unreadable states" in proc.stderr
    assert sent >= 1  # the good trial's images were analysed (architecture and impact views)
    doc = json.loads((out / "codecanvas_analysis.json").read_text())
    good = next(r for r in doc["runs"] if r["has_codecanvas"])
    assert good["trial_path"] == f"{run.name}/{with_state[0].name}"
    assert good["vision"]["architecture_understanding"]["edit_appropriateness"] == 0.9
    for name in ("codecanvas_analysis.json", "codecanvas_comparison.md"):
        text = (out / name).read_text()
        assert str(tmp_path) not in text and str(root) not in text  # no machine path in outputs


def test_budget_stop_applies_to_vision_calls(canvas_trial, tmp_path):
    from analysis_lib.codecanvas import state as cc
    from analysis_lib.judge.client import Ledger
    from analysis_lib.judge.templates import load_template

    model = "openai/gpt-4o-mini"
    state = cc.load_trial_state(canvas_trial)
    requests, _ = vision.build_requests(canvas_trial, state, cc.list_images(cc.session_dir_of(canvas_trial), state))
    probe = JudgeClient(model, api_key=API_KEY)
    reserves = [probe.reserve_usd((load_template(r.template) if isinstance(r.template, str) else r.template).render(r.variables),
                                  r.schema) for r in requests]
    assert all(reserves), f"litellm's offline price map has no price for {model}"
    # Room for the smallest call's worst case (an image counts as many tokens as a large image may), and no more:
    # one call is sent, and its cost leaves no room for another worst case.
    ledger = Ledger(budget_usd=min(reserves))
    with LLMServer() as srv:
        _answers(srv)
        client = JudgeClient(model, api_base=srv.url, api_key=API_KEY, ledger=ledger, concurrency=1, max_retries=0)
        res = vision.run_vision([canvas_trial], client)[canvas_trial.trial_path]
        assert srv.request_count == 1
    assert sum(res[k] is not None for k in vision.RESPONSE_MODELS) == 1
    assert sum("budget stop" in e for e in res["errors"]) == 2
    assert ledger.summary()["budget_stopped"] == 2 and ledger.spent_usd <= min(reserves)
