"""The seeded simulator: latent model (determinism, null exchangeability, injected effects) and written runs."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from analysis_lib.simulate.cli import cli
from analysis_lib.simulate.model import Effects, round_floats, simulate_metrics, task_ids, true_effects
from analysis_lib.simulate.runs import simulate_runs

CONTRACT = ["profile", "task_id", "repetition", "success", "total_tokens", "total_cost_usd", "elapsed_sec",
            "tool_calls_count", "exploration_breadth"]


# ---------------------------------------------------------------- latent model

def test_simulate_metrics_shape_and_columns():
    df = simulate_metrics(7, n_tasks=24, repetitions=3)
    assert len(df) == 3 * 24 * 3
    assert list(df.columns[: len(CONTRACT)]) == CONTRACT
    assert df["success"].dtype == bool
    assert set(df["profile"]) == {"text", "codegraph", "codecanvas"}
    assert df.groupby(["profile", "task_id"]).size().eq(3).all()
    assert sorted(df["repetition"].unique()) == [1, 2, 3]
    assert (df["total_tokens"] == df["total_input_tokens"] + df["total_output_tokens"]).all()
    assert (df["total_cached_tokens"] <= df["total_input_tokens"]).all()
    assert (df["exploration_breadth"] >= 1).all() and (df["tool_calls_count"] >= 4).all()
    assert df["infra_error"].sum() == 1 and df["agent_timeout"].sum() == 1
    assert not df.loc[df["agent_timeout"], "success"].any()
    assert len(set(task_ids(24))) == 24 and len(set(task_ids(100))) == 100


def test_simulate_metrics_deterministic_and_seed_sensitive():
    a, b = simulate_metrics(11), simulate_metrics(11)
    assert a.equals(b)
    c = simulate_metrics(12)
    assert not a["total_tokens"].equals(c["total_tokens"])


def test_null_effects_exchangeable():
    """Under Effects.null() no column differs between profiles beyond chance (paired tests per column)."""
    df = simulate_metrics(3, n_tasks=400, repetitions=3, effects=Effects.null())
    df = df[~df["infra_error"]]
    per_task = df.groupby(["task_id", "profile"])[CONTRACT[3:]].mean().unstack("profile")
    for col in CONTRACT[3:]:
        for prof in ("codegraph", "codecanvas"):
            d = (per_task[(col, prof)] - per_task[(col, "text")]).dropna()
            # Under the null, the paired mean difference is ~N(0, se): |t| < 4 except with p < 1e-4.
            t = d.mean() / (d.std(ddof=1) / np.sqrt(len(d)))
            assert abs(t) < 4, (col, prof, t)
    assert (df["mcp_tool_calls"] == 0).all()


def test_null_type_one_error_rate_is_nominal():
    """Wilcoxon on per-task token medians rejects about 5 % of null data sets (seeded, 200 sets)."""
    rejections = 0
    for seed in range(200):
        df = simulate_metrics(seed, n_tasks=24, repetitions=3, profiles=("text", "codegraph"), effects=Effects.null())
        med = df.groupby(["task_id", "profile"])["total_tokens"].median().unstack("profile")
        rejections += stats.wilcoxon(med["codegraph"], med["text"]).pvalue < 0.05
    # Binomial(200, 0.05): 99.9 % interval is about [2, 20].
    assert 2 <= rejections <= 20, rejections


def test_injected_effects_visible_and_match_true_effects():
    eff = Effects()
    df = simulate_metrics(5, n_tasks=3000, repetitions=3, effects=eff)
    df = df[~df["infra_error"]]
    truth = true_effects(eff)
    rate = df.groupby("profile")["success"].mean()
    for prof in ("text", "codegraph", "codecanvas"):
        assert rate[prof] == pytest.approx(truth[prof]["pass_rate"], abs=0.02)
    med = df.groupby(["task_id", "profile"])["total_tokens"].median().unstack("profile")
    for prof in ("codegraph", "codecanvas"):
        ratio = float(np.median(med[prof] / med["text"]))
        assert ratio == pytest.approx(truth[prof]["token_ratio"], rel=0.03)
        assert 100 * (1 - ratio) == pytest.approx(truth[prof]["token_reduction_pct"], abs=3)
    assert truth["codegraph"]["pass_rate_diff_points"] == pytest.approx(8, abs=0.5)
    assert truth["codecanvas"]["pass_rate_diff_points"] == pytest.approx(12, abs=0.5)
    assert truth["codegraph"]["token_reduction_pct"] == pytest.approx(20)
    assert (df[df.profile == "text"]["mcp_tool_calls"] == 0).all()
    assert (df[df.profile == "codecanvas"]["mcp_tool_calls"] > 0).mean() > 0.8


def test_true_effects_null_is_zero():
    truth = true_effects(Effects.null())
    for vals in truth.values():
        assert vals["pass_rate_diff_points"] == pytest.approx(0, abs=1e-9)
        assert vals["token_ratio"] == 1 and vals["log_odds_shift"] == 0


def test_partial_effect_dicts_and_custom_profiles():
    """Profiles a per-profile dict does not name get the neutral value (no shift, ratio 1, no MCP)."""
    eff = Effects(success_lift={"b": 2.0}, token_ratio={"b": 0.5}, mcp_adoption={}, mcp_call_share={})
    df = simulate_metrics(9, n_tasks=600, repetitions=2, profiles=("a", "b"), effects=eff)
    df = df[~df["infra_error"]]
    rate = df.groupby("profile")["success"].mean()
    truth = true_effects(eff, profiles=("a", "b"), baseline="a")
    assert rate["b"] - rate["a"] == pytest.approx(truth["b"]["pass_rate_diff_points"] / 100, abs=0.04)
    med = df.groupby("profile")["total_tokens"].median()
    assert med["b"] / med["a"] == pytest.approx(0.5, rel=0.1)
    assert (df["mcp_tool_calls"] == 0).all()


def test_simulate_metrics_rejects_bad_arguments():
    with pytest.raises(ValueError, match="n_tasks"):
        simulate_metrics(1, n_tasks=0)
    with pytest.raises(ValueError, match="profiles"):
        simulate_metrics(1, profiles=("text", "text"))


# ---------------------------------------------------------------- written runs

SAMPLE_SEED = 20261121  # the Makefile's `make sample` seed


def _tree_hash(root: Path) -> str:
    """sha256 over every file's relative path and bytes (one machine, one library build)."""
    h = hashlib.sha256()
    for p in sorted(root.rglob("*")):
        if p.is_file():
            h.update(p.relative_to(root).as_posix().encode() + b"\0" + p.read_bytes() + b"\0")
    return h.hexdigest()


@pytest.fixture(scope="module")
def small_runs(tmp_path_factory) -> Path:
    return simulate_runs(tmp_path_factory.mktemp("sim") / "runs", seed=5, n_tasks=6, repetitions=2)


def test_simulate_byte_identical_for_a_seed_and_different_across_seeds(tmp_path, small_runs):
    again = simulate_runs(tmp_path / "again", seed=5, n_tasks=6, repetitions=2)
    assert _tree_hash(again) == _tree_hash(small_runs)
    other = simulate_runs(tmp_path / "other", seed=6, n_tasks=6, repetitions=2)
    assert _tree_hash(other) != _tree_hash(small_runs)


# Floats equal up to this relative tolerance: libm/BLAS builds differ in the last digits (see round_floats).
REL_TOL = 1e-9


def _json_diffs(a, b, where: str) -> list[str]:
    """Where two parsed JSON values differ: numbers beyond ``REL_TOL``, anything else at all."""
    if isinstance(a, dict) and isinstance(b, dict):
        if a.keys() != b.keys():
            return [f"{where}: keys {sorted(a.keys() ^ b.keys())} in only one"]
        return [d for k in a for d in _json_diffs(a[k], b[k], f"{where}.{k}")]
    if isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            return [f"{where}: {len(a)} != {len(b)} items"]
        return [d for i, (x, y) in enumerate(zip(a, b, strict=False)) for d in _json_diffs(x, y, f"{where}[{i}]")]
    numbers = (int, float)
    if (isinstance(a, numbers) and isinstance(b, numbers) and not isinstance(a, bool) and not isinstance(b, bool)
            and isinstance(a, float) == isinstance(b, float)):
        return [] if math.isclose(a, b, rel_tol=REL_TOL, abs_tol=1e-12) else [f"{where}: {a!r} != {b!r}"]
    return [] if (type(a), a) == (type(b), b) else [f"{where}: {a!r} != {b!r}"]


def _tree_diffs(got: Path, want: Path) -> list[str]:
    """What differs between two simulator outputs: the file set, JSON values (numbers to ``REL_TOL``),
    PNG pixels and palette (another zlib may compress the same image differently), other files' bytes."""
    from PIL import Image

    def files(root: Path) -> set[str]:
        return {p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file()}

    got_files, want_files = files(got), files(want)
    diffs = [f"{f}: only in {got}" for f in sorted(got_files - want_files)]
    diffs += [f"{f}: only in {want}" for f in sorted(want_files - got_files)]
    for rel in sorted(got_files & want_files):
        a, b = got / rel, want / rel
        if rel.endswith(".json"):
            diffs += _json_diffs(json.loads(a.read_bytes()), json.loads(b.read_bytes()), rel)
        elif rel.endswith(".png"):
            with Image.open(a) as ia, Image.open(b) as ib:
                if (ia.mode, ia.size, ia.tobytes(), ia.getpalette()) != (ib.mode, ib.size, ib.tobytes(), ib.getpalette()):
                    diffs.append(f"{rel}: other pixels")
        elif a.read_bytes() != b.read_bytes():
            diffs.append(f"{rel}: other bytes")
    return diffs


def test_tree_diffs_tolerates_last_digits_but_not_a_changed_value(tmp_path, small_runs):
    """The committed-sample check below can fail: a 6th-digit change is caught, a 13th-digit one is not."""
    copy = tmp_path / "copy"
    shutil.copytree(small_runs, copy)
    assert _tree_diffs(copy, small_runs) == []
    traj = next(copy.rglob("trajectory.json"))
    doc = json.loads(traj.read_text())
    cost = doc["final_metrics"]["total_cost_usd"]
    doc["final_metrics"]["total_cost_usd"] = cost * (1 + 1e-13)
    traj.write_text(json.dumps(doc))
    assert _tree_diffs(copy, small_runs) == []
    doc["final_metrics"]["total_cost_usd"] = cost * (1 + 1e-5)
    traj.write_text(json.dumps(doc))
    rel = traj.relative_to(copy).as_posix()
    assert [d.split(":")[0] for d in _tree_diffs(copy, small_runs)] == [f"{rel}.final_metrics.total_cost_usd"]
    (copy / "README.md").write_text("edited\n")
    assert "README.md: other bytes" in _tree_diffs(copy, small_runs)


def test_round_floats_keeps_significant_digits_and_leaves_the_rest():
    obj = {"a": [1 / 3, 2, True, "x", None], "b": (123456.7890123456, 0.1 + 0.2), "c": float("inf")}
    assert round_floats(obj) == {"a": [0.333333333333, 2, True, "x", None], "b": [123456.789012, 0.3], "c": float("inf")}
    assert round_floats(2 / 3, 4) == 0.6667 and isinstance(round_floats(1.0), float)


@pytest.mark.slow  # regenerates 216 trials: 2-7 s depending on disk and load
def test_committed_sample_is_the_seeded_output(tmp_path, sample_runs):
    """runs/sample is what `make sample` writes: regenerate and compare every value (floats to REL_TOL)."""
    fresh = simulate_runs(tmp_path / "sample", seed=SAMPLE_SEED)
    diffs = _tree_diffs(fresh, sample_runs)
    assert not diffs, (f"runs/sample is stale ({len(diffs)} differences, first: {diffs[:3]}): "
                       "regenerate it with `make sample`")


def test_index_json_documents_the_simulation(sample_runs):
    idx = json.loads((sample_runs / "index.json").read_text())
    assert idx["simulated"] is True and idx["generator"] == "analysis_lib.simulate" and idx["seed"] == SAMPLE_SEED
    assert "SIMULATED" in idx["note"]
    assert set(idx["effects"]) == {f.name for f in dataclasses.fields(Effects)}
    assert all(v["description"] for v in idx["effects"].values())
    assert idx["profiles"] == ["text", "codegraph", "codecanvas"] and len(idx["tasks"]) == 24
    assert len(idx["runs"]) == 9 and {r["repetition"] for r in idx["runs"]} == {1, 2, 3}
    for run in idx["runs"]:
        assert run["run_id"].endswith("__" + run["profile"]) and (sample_runs / run["run_id"]).is_dir()
        assert sorted(p.name for p in (sample_runs / run["run_id"]).iterdir()) == sorted(idx["tasks"])
    assert idx["true_effects"]["codecanvas"]["token_reduction_pct"] == pytest.approx(30)


def _trials(root: Path):
    idx = json.loads((root / "index.json").read_text())
    for run in idx["runs"]:
        for task in idx["tasks"]:
            yield run, task, root / run["run_id"] / task


def test_every_trajectory_is_valid_atif(sample_runs):
    n = 0
    for run, _task, d in _trials(sample_runs):
        tpath = d / "agent" / "trajectory.json"
        if not tpath.exists():
            continue
        n += 1
        t = json.loads(tpath.read_text())
        assert t["schema_version"] == "ATIF-v1.6" and t["agent"]["name"] == "claude-code" and t["session_id"]
        steps = t["steps"]
        assert [s["step_id"] for s in steps] == list(range(1, len(steps) + 1))
        assert steps[0]["source"] == "user" and steps[0]["message"]
        agent = [s for s in steps if s["source"] == "agent"]
        fm = t["final_metrics"]
        assert fm["total_prompt_tokens"] == sum(s["metrics"]["prompt_tokens"] for s in agent)
        assert fm["total_completion_tokens"] == sum(s["metrics"]["completion_tokens"] for s in agent)
        assert fm["total_cached_tokens"] == sum(s["metrics"]["cached_tokens"] for s in agent)
        assert fm["total_cost_usd"] == pytest.approx(sum(s["metrics"]["cost_usd"] for s in agent), abs=1e-9)
        assert fm["total_steps"] == len(steps)
        assert all(s["metrics"]["cached_tokens"] <= s["metrics"]["prompt_tokens"] for s in agent)
        stamps = [s["timestamp"] for s in steps]
        assert stamps == sorted(stamps) and all(x.endswith("Z") for x in stamps)
        for s in agent:
            ids = [c["tool_call_id"] for c in s.get("tool_calls", [])]
            res = s.get("observation", {}).get("results", [])
            assert [r["source_call_id"] for r in res] == ids
            for r in res:
                if r.get("extra", {}).get("is_error"):
                    assert r["content"].startswith("Error:")
            names = {c["function_name"] for c in s.get("tool_calls", [])}
            if run["profile"] == "text":
                assert not any(x.startswith("mcp__") for x in names)
            if run["profile"] == "codegraph":
                assert not any(x.startswith("mcp__codecanvas") for x in names)
    assert n == 215


def test_results_ctrf_and_rewards_agree(sample_runs):
    kinds = []
    for _run, task, d in _trials(sample_runs):
        res = json.loads((d / "result.json").read_text())
        assert res["task_name"] == task and res["agent_info"]["name"] == "claude-code"
        exc = res["exception_info"]
        if exc and res["verifier_result"] is None:
            kinds.append("infra")
            assert not (d / "agent").exists() and not (d / "verifier").exists()
            continue
        reward = res["verifier_result"]["rewards"]["reward"]
        assert (d / "verifier" / "reward.txt").read_text() == ("1\n" if reward == 1.0 else "0\n")
        ctrf = json.loads((d / "verifier" / "ctrf.json").read_text())
        assert "reportFormat" not in ctrf and ctrf["results"]["tool"]["name"] == "pytest"
        summ, tests = ctrf["results"]["summary"], ctrf["results"]["tests"]
        assert summ["tests"] == len(tests) == summ["passed"] + summ["failed"]
        assert (summ["failed"] == 0) == (reward == 1.0)
        assert all(isinstance(x["duration"], float) and x["file_path"] for x in tests)
        assert all(x["raw_status"] == "call_failed" for x in tests if x["status"] == "failed")
        ar = res["agent_result"]
        fm = json.loads((d / "agent" / "trajectory.json").read_text())["final_metrics"]
        assert (ar["n_input_tokens"], ar["n_cache_tokens"], ar["n_output_tokens"]) == (
            fm["total_prompt_tokens"], fm["total_cached_tokens"], fm["total_completion_tokens"])
        assert res["started_at"] < res["agent_execution"]["started_at"] < res["agent_execution"]["finished_at"] < res["finished_at"]
        if exc:
            kinds.append("timeout")
            assert exc["exception_type"] == "AgentTimeoutError" and reward == 0.0
    assert sorted(kinds) == ["infra", "timeout"]


def _norm(p: str) -> str:
    return p.removeprefix("/app/").removeprefix("./")


def test_canvas_state_ids_resolve_and_edits_mostly_in_blast_radius(sample_runs):
    inside = total = 0
    variants = set()
    n_states = 0
    for run, _task, d in _trials(sample_runs):
        cdir = d / "agent" / "sessions" / "codecanvas"
        if run["profile"] != "codecanvas":
            assert not cdir.exists()
            continue
        if not cdir.exists():
            continue
        n_states += 1
        st = json.loads((cdir / "state.json").read_text())
        assert st["version"] == 1
        syms = st["symbol_files"]
        ev_ids = {e["id"] for e in st["evidence"]}
        claim_ids = {c["id"] for c in st["claims"]}
        assert len(ev_ids) == len(st["evidence"]) and len(claim_ids) == len(st["claims"])
        assert {e["kind"] for e in st["evidence"]} <= {"search", "read", "impact", "test"}
        assert {c["kind"] for c in st["claims"]} <= {"hypothesis", "finding", "question"}
        assert {x["kind"] for x in st["decisions"]} <= {"mark", "skip", "plan", "edit"}
        for c in st["claims"]:
            assert set(c["evidence_ids"]) <= ev_ids
        for x in st["decisions"]:
            assert set(x["claim_ids"]) <= claim_ids and set(x["symbol_ids"]) <= set(syms)
        for e in st["evidence"]:
            assert e.get("png_path") is None or (cdir / e["png_path"]).is_file()
        traj = json.loads((d / "agent" / "trajectory.json").read_text())
        n_steps = len(traj["steps"])
        assert all(1 <= e["step"] <= n_steps for e in st["evidence"])
        radius = set()
        for a in st["analyses"]:
            assert {a["target"], *a["affected"]} <= set(syms)
            assert set(a["addressed"]) <= set(a["affected"]) and set(a["skipped"]) <= set(a["affected"])
            assert (cdir / a["png_path"]).is_file()
            radius |= {_norm(syms[s]) for s in (a["target"], *a["affected"])}
        for name in st["images"].values():
            assert (cdir / name).is_file()
        variants |= {p.split("src/")[0] for p in syms.values() if "src/" in p}
        if st["analyses"]:
            edits = {_norm(c["arguments"]["file_path"]) for s in traj["steps"] for c in s.get("tool_calls", [])
                     if c["function_name"] in ("Edit", "Write")}
            inside += len(edits & radius)
            total += len(edits)
    assert n_states >= 50
    assert variants == {"", "./", "/app/"}
    assert 0.7 <= inside / total < 1.0, (inside, total)


def test_sample_size_bounded(sample_runs):
    files = [p for p in sample_runs.rglob("*") if p.is_file()]
    total = sum(p.stat().st_size for p in files)
    assert total < 4.5e6, total
    trajs = [p.stat().st_size for p in files if p.name == "trajectory.json"]
    assert 4_000 < float(np.median(trajs)) < 16_000 and max(trajs) < 80_000
    pngs = [p.stat().st_size for p in files if p.suffix == ".png"]
    assert pngs and max(pngs) < 8_000


def test_files_give_the_latent_metrics(small_runs):
    """The Layer 1 metrics computed from the written files equal simulate_metrics for the same arguments."""
    from analysis_lib.ingest.load import load_trials
    from analysis_lib.metrics.trial_metrics import trial_metrics

    trials, errors = load_trials(small_runs)
    assert not errors and len(trials) == 3 * 6 * 2
    got = pd.DataFrame([trial_metrics(t) | {"profile": t.profile, "task_id": t.task_id, "repetition": t.repetition}
                        for t in trials]).set_index(["profile", "task_id", "repetition"]).sort_index()
    want = simulate_metrics(5, n_tasks=6, repetitions=2).set_index(["profile", "task_id", "repetition"]).sort_index()
    assert got.index.equals(want.index)
    assert (got["infra_error"].fillna(False).astype(bool) == want["infra_error"]).all()
    ok = ~want["infra_error"]
    for col in ("total_tokens", "total_input_tokens", "total_output_tokens", "total_cached_tokens", "tool_calls_count",
                "exploration_breadth", "mcp_tool_calls"):
        assert (got.loc[ok, col].astype("int64") == want.loc[ok, col]).all(), col
    assert (got.loc[ok, "success"].astype(bool) == want.loc[ok, "success"]).all()
    assert np.allclose(got.loc[ok, "elapsed_sec"].astype(float), want.loc[ok, "elapsed_sec"], atol=1e-6)
    assert np.allclose(got.loc[ok, "total_cost_usd"].astype(float), want.loc[ok, "total_cost_usd"], atol=1e-6)


# ---------------------------------------------------------------- CLI

def test_cli_refuses_non_empty_dir_and_force_replaces_only_simulator_output(tmp_path, capsys):
    out = tmp_path / "runs"
    out.mkdir()
    (out / "notes.txt").write_text("mine")
    assert cli(["--seed", "1", "--out", str(out), "--tasks", "2", "--repetitions", "1"]) == 2
    assert "not empty" in capsys.readouterr().err
    assert cli(["--seed", "1", "--out", str(out), "--tasks", "2", "--repetitions", "1", "--force"]) == 2
    assert "not a simulator output" in capsys.readouterr().err and (out / "notes.txt").exists()
    sim = tmp_path / "sim"
    assert cli(["--seed", "1", "--out", str(sim), "--tasks", "2", "--repetitions", "1"]) == 0
    assert cli(["--seed", "2", "--out", str(sim), "--tasks", "3", "--repetitions", "1", "--force", "--null-effects"]) == 0
    idx = json.loads((sim / "index.json").read_text())
    assert idx["seed"] == 2 and len(idx["tasks"]) == 3
    assert idx["effects"]["success_lift"]["value"] == {"text": 0.0, "codegraph": 0.0, "codecanvas": 0.0}
    assert not list(tmp_path.glob(".sim.*")), "no temporary folder left behind"


def test_cli_subprocess_via_registry(tmp_path):
    """`python -m analysis_lib simulate` reaches simulate.cli through the subcommand registry."""
    root = Path(__file__).resolve().parents[1]
    proc = subprocess.run([sys.executable, "-m", "analysis_lib", "simulate", "--seed", "3", "--out", str(tmp_path / "r"),
                           "--tasks", "2", "--repetitions", "1"], cwd=root, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert "simulated trials" in proc.stdout and (tmp_path / "r" / "index.json").exists()


def test_breadth_never_exceeds_the_files_of_the_task_repository():
    """Long trials drew a breadth above the 40 files a fake repository holds, and writing them failed."""
    from analysis_lib.simulate.model import REPO_MODULES

    df = simulate_metrics(seed=1, n_tasks=200, repetitions=3)
    assert df["exploration_breadth"].max() == 2 * REPO_MODULES  # the cap is reached, and holds
