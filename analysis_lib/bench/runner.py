"""The benchmark run: plan (schedule + spend projection), then the trials in order, resumable.

``plan()`` and ``run_full()`` are what ``python -m analysis_lib bench full`` and the notebook
``00_run_benchmark`` call; ``run_spike()`` runs one task under both conditions once.

Output (the run layout :mod:`analysis_lib.ingest` reads)::

    <runs_dir>/index.json
    <runs_dir>/full_run.json                      (also copied to --output)
    <runs_dir>/<YYYY-MM-DD__HH-MM-SS>__<condition>/<task_id>/
        agent/{claude-code.txt, trajectory.json, patch.diff, stderr.txt}
        verifier/{reward.txt, ctrf.json}
        result.json                               (Harbor TrialResult shape + a "bench" section)
    <runs_dir>/.bench/{plan.json, journal/*.json}  (resume state)

One timestamped folder per (condition, run): the run index is the repetition. Its timestamp is
the run's start (plus the run index in seconds), fixed in ``plan.json`` so a resume writes into
the same folders.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import sys
import uuid
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pandas as pd

from ..core import outputs as files
from ..core.fileio import atomic_write_bytes, atomic_write_json, read_json
from ..core.lock import folder_lock
from ..core.trial import InputError
from ..study import plan as plan_mod
from . import adapters as _adapters
from . import looks as looks_mod
from .budget import BudgetGuard, project_spend
from .environment import git_commit, pair_warnings, tool_commit
from .evaluate import EvaluationResult, run_evaluation
from .journal import Journal, PlanMismatchError, state_dir
from .manifest import Manifest, is_url, load_manifest, manifest_sha256, parse_manifest
from .process import check_stop, git
from .schedule import build_schedule, pairs, task_order, trial_key
from .scratch import clear_scratch, new_scratch

GENERATOR = "analysis_lib.bench"
# Trial statuses of scheduled trials that did not run.
NOT_RUN = ("pending", "skipped_budget", "skipped_sequential")
DEFAULT_MODEL = "claude-sonnet-4-5-20250929"
TS_FORMAT = "%Y-%m-%d__%H-%M-%S"
# The runner's lock inside the runs folder's state folder (ingest never reads ``.bench/``).
LOCK_FILE = "runner.lock"


@dataclass
class Plan:
    """A planned benchmark: the manifest, the seeded schedule and the spend projection."""

    manifest: Manifest
    manifest_source: str | None
    seed: int
    runs_per_condition: int
    phase_budget_usd: float
    # Private so that notebooks listing a plan's attributes show the tables, not a long list.
    _entries: list[dict]
    projection: dict
    # The analysis plan's sequential design (looks and boundaries), when it declares one.
    sequential: dict | None = None

    def entries(self) -> list[dict]:
        """The schedule entries ``{"pair", "task_id", "run", "condition", "position"}`` in execution order."""
        return [dict(e) for e in self._entries]

    @property
    def schedule(self):
        """The schedule as a DataFrame (one row per trial, in execution order)."""
        return pd.DataFrame(self._entries, columns=["pair", "task_id", "run", "condition", "position"])

    @property
    def spend(self):
        """Projected spend per condition and in total (DataFrame), from the per-trial cost prior."""
        cost = self.projection["cost_per_trial_usd"]
        rows = [
            {"condition": c.name, "trials": sum(1 for e in self._entries if e["condition"] == c.name)} for c in self.manifest.conditions
        ]
        rows.append({"condition": "total", "trials": len(self._entries)})
        df = pd.DataFrame(rows)
        df["cost_per_trial_usd"] = cost
        df["projected_usd"] = df["trials"] * cost
        return df

    @property
    def manifest_sha256(self) -> str:
        return manifest_sha256(self.manifest)

    def to_json(self) -> dict[str, Any]:
        m = self.manifest
        return {
            "generator": GENERATOR,
            "simulated": False,
            "manifest": {"name": m.name, "source": self.manifest_source, "sha256": self.manifest_sha256, "content": m.to_json()},
            "manifest_sha256": self.manifest_sha256,
            "seed": self.seed,
            "runs_per_condition": self.runs_per_condition,
            "conditions": [c.name for c in m.conditions],
            "tasks": [t.id for t in m.tasks],
            "schedule": self.entries(),
            "projection": self.projection,
            **({"sequential": self.sequential} if self.sequential is not None else {}),
        }

    def describe(self) -> str:
        """The schedule and the projection as plain text (what ``--dry-run`` prints)."""
        p = self.projection
        lines = [
            f"plan: {len(self._entries)} trials = {len(self.manifest.tasks)} tasks x {len(self.manifest.conditions)} conditions"
            f" x {self.runs_per_condition} runs, seed {self.seed}"
        ]
        lines.append(f"{'#':>4} {'pair':>4} {'run':>3} {'pos':>3}  condition        task_id")
        for i, e in enumerate(self._entries):
            lines.append(f"{i:>4} {e['pair']:>4} {e['run']:>3} {e['position']:>3}  {e['condition']:<16} {e['task_id']}")
        lines.append(
            f"projected spend: ${p['projected_total_usd']:.2f} (${p['cost_per_trial_usd']:.2f}/trial, {p['basis']}); "
            f"phase budget ${p['phase_budget_usd']:.2f}, guardrail at ${p['limit_usd']:.2f}: "
            + ("all pairs fit" if p["fits"] else f"only {p['pairs_within_limit']} of {p['pairs']} pairs fit")
        )
        if self.sequential is not None:
            lines += looks_mod.describe(self.sequential)
        return "\n".join(lines)


def make_plan(manifest: Manifest, runs_per_condition: int, seed: int, phase_budget_usd: float, manifest_source: str | None = None,
              analysis_plan: plan_mod.AnalysisPlan | None = None) -> Plan:
    """Plan a validated manifest (see :func:`plan`); a sequential analysis plan gets the sequential schedule and its looks."""
    if not phase_budget_usd > 0:
        raise ValueError(f"phase_budget_usd: must be > 0, got {phase_budget_usd}")
    conds = [c.name for c in manifest.conditions]
    sequential = analysis_plan is not None and analysis_plan.sequential is not None
    entries = build_schedule([t.id for t in manifest.tasks], conds, runs_per_condition, seed, by_task=sequential)
    proj = project_spend(len(entries), len(conds), manifest.budget.estimated_cost_per_trial_usd, phase_budget_usd)
    proj["basis"] = "manifest budget.estimated_cost_per_trial_usd"
    design = None
    if sequential:
        assert analysis_plan is not None
        design = looks_mod.design_record(analysis_plan, len(manifest.tasks), conds, phase_budget_usd, proj["limit_usd"],
                                         manifest.budget.estimated_cost_per_trial_usd * runs_per_condition * len(conds))
    return Plan(manifest, manifest_source, seed, runs_per_condition, float(phase_budget_usd), entries, proj, design)


def plan(manifest_path: str | os.PathLike, runs_per_condition: int, seed: int, phase_budget_usd: float,
         analysis_plan: plan_mod.AnalysisPlan | None = None) -> Plan:
    """Validate the manifest and build the seeded schedule and its spend projection (nothing runs)."""
    return make_plan(load_manifest(manifest_path), runs_per_condition, seed, phase_budget_usd, str(manifest_path), analysis_plan)


# -- one trial ------------------------------------------------------------------------------------


def _now() -> datetime:
    return datetime.now(UTC)


def _iso(t: datetime | None) -> str | None:
    return t.strftime("%Y-%m-%dT%H:%M:%S.%fZ") if t else None


def run_dir_name(started_at: str, run: int, condition: str) -> str:
    """``<timestamp>__<condition>``; run r's timestamp is the run start plus r-1 seconds."""
    t0 = datetime.fromisoformat(started_at.replace("Z", "+00:00"))
    return f"{(t0 + timedelta(seconds=run - 1)).strftime(TS_FORMAT)}__{condition}"


def checkout(manifest: Manifest, repo: str, commit: str, dest: Path, cache_root: Path) -> str:
    """Clone ``repo`` at ``commit`` into ``dest`` (local repos shared, URLs mirrored once); returns HEAD."""
    if is_url(repo):
        mirror = cache_root / hashlib.sha1(repo.encode()).hexdigest()[:16]
        if not mirror.exists():
            git(["clone", "--quiet", "--mirror", repo, str(mirror)], timeout=3600)
        src = str(mirror)
    else:
        src = os.path.abspath(manifest.resolve(repo))
        if not os.path.isdir(src):
            raise RuntimeError(f"repo {repo}: no such folder")
    try:
        git(["clone", "--quiet", "--shared", "--no-checkout", src, str(dest)])
        git(["-c", "advice.detachedHead=false", "checkout", "--quiet", "--detach", commit], cwd=dest)
        return git(["rev-parse", "HEAD"], cwd=dest)
    except RuntimeError as exc:
        raise RuntimeError(f"checkout of {repo} at {commit} failed ({exc})") from None


def _save_patch(workdir: Path, agent_dir: Path) -> None:
    try:
        git(["add", "-A"], cwd=workdir)
        diff = git(["diff", "--cached", "HEAD"], cwd=workdir)
    except RuntimeError:
        return
    if diff:
        atomic_write_bytes(agent_dir / "patch.diff", (diff + "\n").encode())


def _copy_details(details_path: str, workdir: Path, verifier_dir: Path, warnings: list[str]) -> None:
    src = Path(details_path) if os.path.isabs(details_path) else workdir / details_path
    if not src.is_file():
        warnings.append(f"evaluator details_path {details_path}: no such file")
        return
    name = src.name
    try:
        obj = read_json(src, stage="ctrf")
        if isinstance(obj, dict) and isinstance(obj.get("results"), dict) and "tests" in obj["results"]:
            name = "ctrf.json"
    except InputError:
        pass
    verifier_dir.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(src, verifier_dir / name)


def same_model(a: str, b: str) -> bool:
    """Model ids equal up to a provider prefix (Harbor reports ``claude-x`` for ``anthropic/claude-x``)."""
    return a.split("/")[-1] == b.split("/")[-1]


def _agent_status(outcome: _adapters.AgentOutcome) -> str:
    if outcome.error:
        return "agent_error"
    if outcome.timed_out:
        return "agent_timeout"
    if outcome.exit_code not in (0, None):
        return "agent_error"
    return "completed"


def _exception_info(
    status: str, outcome: _adapters.AgentOutcome | None, evaluation: EvaluationResult | None, setup_error: str | None, at: str
) -> dict | None:
    if setup_error:
        typ, msg = "SetupError", setup_error
    elif status == "agent_timeout":
        typ, msg = "AgentTimeoutError", f"agent exceeded its time limit ({outcome.duration_sec} s)"
    elif status == "agent_error":
        typ, msg = (
            ("AgentStartError", outcome.error)
            if outcome.error
            else ("NonZeroAgentExitCodeError", f"agent exited with code {outcome.exit_code}")
        )
    elif evaluation is not None and evaluation.status == "error":
        typ, msg = "EvaluationError", evaluation.error
    else:
        return None
    return {"exception_type": typ, "exception_message": msg, "exception_traceback": "", "occurred_at": at}


@dataclass
class _RunContext:
    plan: Plan
    runs_dir: Path
    started_at: str
    tool_commit: str | None
    log: Callable[[str], None]
    env_warnings: list[str] = field(default_factory=list)
    looks: list[dict] = field(default_factory=list)  # interim looks so far (sequential design)
    seq_stop_pair: int | None = None  # first pair not run because the sequential design stopped the study


def run_trial(rc: _RunContext, entry: dict) -> dict:
    """Run one scheduled trial end to end and move its folder into the run layout; returns its record."""
    m = rc.plan.manifest
    task, cond = m.task(entry["task_id"]), m.condition(entry["condition"])
    key = trial_key(entry)
    rel_dir = Path(run_dir_name(rc.started_at, entry["run"], cond.name)) / task.id
    staging = state_dir(rc.runs_dir) / "staging" / key
    shutil.rmtree(staging, ignore_errors=True)
    (staging / "agent").mkdir(parents=True)
    (staging / "verifier").mkdir(parents=True)
    started = _now()
    warnings: list[str] = []
    setup_error = None
    outcome: _adapters.AgentOutcome | None = None
    evaluation: EvaluationResult | None = None
    target_commit = None
    # The trial's private scratch folder (checkout, agent config, copied login); removed at trial end, on
    # Ctrl-C/SIGTERM (this finally) and, after a kill -9, by the next run on this runs folder.
    tmp = new_scratch(rc.runs_dir, key)
    try:
        workdir = tmp / "repo" if _adapters.needs_checkout(cond) else None
        if workdir is not None:
            try:
                target_commit = checkout(m, task.repo, task.commit, workdir, state_dir(rc.runs_dir) / "repos")
            except RuntimeError as exc:
                setup_error = str(exc)
        else:
            target_commit = task.commit  # Harbor builds its own environment from the task folder
        values = {
            "task_id": task.id,
            "condition": cond.name,
            "run": str(entry["run"]),
            "pair": str(entry["pair"]),
            "repo_path": str(workdir if workdir is not None else os.path.abspath(m.resolve(task.repo))),
            "trial_dir": str(staging.resolve()),
            "instruction": task.instruction,
            "model": m.environment.model,
            "manifest_dir": os.path.abspath(m.base_dir or "."),
        }
        env = {
            **os.environ,
            "BENCH_TASK_ID": task.id,
            "BENCH_CONDITION": cond.name,
            "BENCH_RUN": str(entry["run"]),
            "BENCH_PAIR": str(entry["pair"]),
            "BENCH_TRIAL_DIR": values["trial_dir"],
        }
        if setup_error is None:
            ctx = _adapters.TrialContext(m, task, cond, staging, workdir, values, env)
            outcome = _adapters.ADAPTER_RUNNERS[cond.adapter](ctx)
            warnings += outcome.warnings
            if workdir is not None:
                _save_patch(workdir, staging / "agent")
            if outcome.error is None:
                if cond.adapter == "harbor":
                    if outcome.reward is not None:
                        evaluation = EvaluationResult("ok", outcome.reward >= 1.0)
                    else:
                        evaluation = EvaluationResult("error", None, error="harbor trial has no verifier reward")
                elif task.evaluation is not None:
                    evaluation = run_evaluation(task.evaluation, values, cwd=workdir, env=env)
                    if evaluation.status == "ok" and evaluation.details_path:
                        _copy_details(evaluation.details_path, workdir, staging / "verifier", warnings)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    finished = _now()
    status = "setup_error" if setup_error else _agent_status(outcome)
    verdict = (
        "not_evaluated"
        if evaluation is None
        else ("evaluation_error" if evaluation.status == "error" else ("passed" if evaluation.passed else "failed"))
    )
    if cond.adapter == "harbor" and evaluation is not None and evaluation.status == "ok":
        pass  # Harbor already wrote verifier/reward.txt (copied with its verifier folder)
    elif evaluation is not None and evaluation.status == "ok":
        atomic_write_bytes(staging / "verifier" / "reward.txt", b"1\n" if evaluation.passed else b"0\n")
    environment = {
        "model": (outcome.model_reported if outcome and outcome.model_reported else m.environment.model),
        "model_pinned": m.environment.model,
        "tool_commit": rc.tool_commit,
        "target_repo_commit": target_commit,
        "target_repo_commit_pinned": task.commit,
        "adapter": cond.adapter,
        "adapter_version": outcome.adapter_version if outcome else None,
    }
    if outcome and outcome.model_reported and not same_model(outcome.model_reported, m.environment.model):
        warnings.append(f"agent reported model {outcome.model_reported}, manifest pins {m.environment.model}")
    record = {
        **entry,
        "key": key,
        "status": status,
        "outcome": verdict,
        "evaluation": evaluation.to_json() if evaluation else None,
        "cost_usd": outcome.cost_usd if outcome else None,
        "trial_dir": rel_dir.as_posix(),
        "environment": environment,
        "agent": None
        if outcome is None
        else {
            "exit_code": outcome.exit_code,
            "timed_out": outcome.timed_out,
            "error": outcome.error,
            "duration_sec": outcome.duration_sec,
            "trajectory": outcome.trajectory,
            "mcp_servers": outcome.mcp_servers,
            "mcp_exposed": outcome.mcp_exposed,
            "mcp_used": outcome.mcp_used,
            "permission_denials": outcome.permission_denials,
            "token_source": outcome.token_source,
            "cost_source": outcome.cost_source,
            **({"stderr_tail": outcome.stderr_tail} if outcome.stderr_tail else {}),
        },
        "setup_error": setup_error,
        "warnings": warnings,
        "started_at": _iso(started),
        "finished_at": _iso(finished),
    }
    result = _result_json(rc, entry, record, outcome, evaluation, setup_error, started, finished)
    atomic_write_json(staging / "result.json", result)
    final = rc.runs_dir / rel_dir
    if final.exists():  # a trial that finished moving but was not journaled before a crash
        shutil.rmtree(final)
    final.parent.mkdir(parents=True, exist_ok=True)
    for empty in (staging / "verifier", staging / "agent"):
        if empty.is_dir() and not any(empty.iterdir()):
            empty.rmdir()
    os.replace(staging, final)
    return record


def _result_json(rc: _RunContext, entry: dict, record: dict, outcome, evaluation, setup_error, started, finished) -> dict:
    """A Harbor-shaped TrialResult, so that every reader of Harbor trials reads ours too."""
    m = rc.plan.manifest
    cond = m.condition(entry["condition"])
    base = dict(outcome.harbor_result) if outcome is not None and outcome.harbor_result else {}
    agent_name = {"claude_code": "claude-code", "command": cond.name}.get(cond.adapter, getattr(cond.settings, "agent", cond.adapter))
    base.update(
        {
            "id": str(uuid.uuid5(uuid.NAMESPACE_URL, f"{rc.plan.manifest_sha256}/{rc.started_at}/{record['key']}")),
            "task_name": entry["task_id"],
            "trial_name": f"{entry['task_id']}__{cond.name}__r{entry['run']}",
            "source": m.name,
            "started_at": _iso(started),
            "finished_at": _iso(finished),
        }
    )
    task = m.task(entry["task_id"])
    base.setdefault("task_id", {"path": task.repo})
    # Fields Harbor's TrialResult model requires, without machine paths: the trial folder relative to
    # the runs folder, a checksum of what the task is (repo, commit, instruction), the job as a UUID.
    base.setdefault("trial_uri", record["trial_dir"])
    base.setdefault("task_checksum", hashlib.sha256(f"{task.repo}\n{task.commit}\n{task.instruction}".encode()).hexdigest())
    base.setdefault(
        "config",
        {
            "task": {"path": task.repo},
            "agent": {
                "name": agent_name,
                "model_name": m.environment.model,
                "kwargs": cond.settings.model_dump(mode="json", exclude_none=True),
            },
            "job_id": str(uuid.uuid5(uuid.NAMESPACE_URL, f"{rc.plan.manifest_sha256}/{rc.started_at}")),
        },
    )
    if "agent_info" not in base:
        base["agent_info"] = {
            "name": agent_name,
            "version": (outcome.adapter_version if outcome else "unknown"),
            "model_info": {"name": record["environment"]["model"], "provider": "anthropic" if cond.adapter == "claude_code" else None},
        }
    if outcome is not None and "agent_result" not in base:
        base["agent_result"] = {
            "n_input_tokens": outcome.n_input_tokens,
            "n_cache_tokens": outcome.n_cache_tokens,
            "n_output_tokens": outcome.n_output_tokens,
            "cost_usd": outcome.cost_usd,
        }
    if "verifier_result" not in base:
        ok = evaluation is not None and evaluation.status == "ok"
        base["verifier_result"] = {"rewards": {"reward": 1.0 if evaluation.passed else 0.0}} if ok else None
    exc = _exception_info(record["status"], outcome, evaluation, setup_error, record["finished_at"])
    if exc and not base.get("exception_info"):
        base["exception_info"] = exc
    base.setdefault("exception_info", None)
    if outcome is not None and outcome.duration_sec is not None:
        base.setdefault(
            "agent_execution", {"started_at": _iso(started), "finished_at": _iso(started + timedelta(seconds=outcome.duration_sec))}
        )
    base["bench"] = {
        k: record[k] for k in ("pair", "run", "condition", "position", "status", "outcome", "evaluation", "environment", "warnings")
    }
    if outcome is not None:
        # Where the tokens came from: the session transcript (exact), modelUsage or usage of the result event.
        base["bench"].update({k: getattr(outcome, k) for k in ("token_source", "cost_source", "mcp_exposed", "mcp_used")})
    base["bench"]["seed"] = rc.plan.seed
    return base


# -- the whole run -------------------------------------------------------------------------------


def _trial_rows(plan_: Plan, done: dict[str, dict], guard: BudgetGuard, seq_stop_pair: int | None = None) -> list[dict]:
    rows = []
    for e in plan_._entries:
        k = trial_key(e)
        if k in done:
            rows.append(done[k])
        else:
            skipped = guard.stopped and guard.stopped_before_pair is not None and e["pair"] >= guard.stopped_before_pair
            stopped = seq_stop_pair is not None and e["pair"] >= seq_stop_pair
            rows.append(
                {
                    **e,
                    "key": k,
                    "status": "skipped_sequential" if stopped else ("skipped_budget" if skipped else "pending"),
                    "outcome": None,
                    "evaluation": None,
                    "cost_usd": None,
                    "trial_dir": None,
                    "environment": None,
                }
            )
    return rows


def _summary(rows: list[dict]) -> dict:
    count = lambda f: sum(1 for r in rows if f(r))  # noqa: E731
    return {
        "trials": len(rows),
        "finished": count(lambda r: r["status"] not in NOT_RUN),
        "pending": count(lambda r: r["status"] == "pending"),
        "skipped_budget": count(lambda r: r["status"] == "skipped_budget"),
        "skipped_sequential": count(lambda r: r["status"] == "skipped_sequential"),
        "passed": count(lambda r: r.get("outcome") == "passed"),
        "failed": count(lambda r: r.get("outcome") == "failed"),
        "evaluation_errors": count(lambda r: r.get("outcome") == "evaluation_error"),
        "agent_errors": count(lambda r: r["status"] in ("agent_error", "agent_timeout", "setup_error")),
        "not_evaluated": count(lambda r: r.get("outcome") == "not_evaluated"),
        "by_status": dict(sorted(Counter(r["status"] for r in rows).items())),
        # Conditions whose every finished trial failed for agent or evaluator reasons: nothing was measured.
        "failed_conditions": failed_conditions(rows),
    }


def failed_conditions(rows: list[dict]) -> list[str]:
    """Conditions with finished trials, all of them agent/setup errors, timeouts or evaluation errors."""
    bad = ("agent_error", "agent_timeout", "setup_error")
    out = []
    for cond in dict.fromkeys(r["condition"] for r in rows):
        done = [r for r in rows if r["condition"] == cond and r["status"] not in NOT_RUN]
        if done and all(r["status"] in bad or r.get("outcome") == "evaluation_error" for r in done):
            out.append(cond)
    return out


def _write_outputs(rc: _RunContext, done: dict[str, dict], guard: BudgetGuard, status: str, output: Path | None,
                   error: str | None = None, runs_copy: bool = True) -> dict:
    """Write the run record (``full_run.json`` and ``index.json`` in the runs folder unless ``runs_copy`` is
    False, and ``full_run.json`` at ``output``); returns it. ``error``: why a failed run ended."""
    rows = _trial_rows(rc.plan, done, guard, rc.seq_stop_pair)
    warnings = pair_warnings(rows)
    obj = {
        **rc.plan.to_json(),
        "kind": "bench_full_run",
        "dry_run": False,
        "status": status,
        "started_at": rc.started_at,
        "updated_at": _iso(_now()),
        "environment": {
            "pinned": rc.plan.manifest.environment.model_dump(mode="json", exclude_none=True),
            "tool_commit": rc.tool_commit,
            "warnings": rc.env_warnings,
        },
        "environment_warnings": warnings,
        "budget": guard.state(),
        "trials": rows,
        "summary": _summary(rows),
        **({"error": error} if error else {}),
    }
    if rc.plan.sequential is not None:
        last = rc.looks[-1] if rc.looks else None
        stopped = last is not None and last["decision"] not in ("continue", "final", "budget")
        obj["sequential"] = {**rc.plan.sequential, "looks": rc.looks, "stopped": stopped,
                             "decision": last["decision"] if last else "continue",
                             "reason": last.get("reason") if stopped and last else None,
                             "stop_look": last["look"] if stopped and last else None,
                             "task_order": task_order(rc.plan._entries)}
    # runs_dir: where the trials are, relative to the file (no machine path), for `analysis_lib results`.
    if runs_copy:
        atomic_write_json(rc.runs_dir / files.FULL_RUN, {**obj, "runs_dir": "."})
    if output is not None:
        try:
            rel = os.path.relpath(rc.runs_dir, Path(output).resolve().parent)
        except ValueError:  # another drive (Windows): results needs --runs-dir
            rel = None
        atomic_write_json(output, {**obj, "runs_dir": rel} if rel else obj)
    if not runs_copy:
        return obj
    runs = sorted({(r["condition"], r["run"]) for r in rows})
    atomic_write_json(
        rc.runs_dir / files.RUN_INDEX,
        {
            "simulated": False,
            "generator": GENERATOR,
            "seed": rc.plan.seed,
            "manifest": rc.plan.manifest.name,
            "profiles": [c.name for c in rc.plan.manifest.conditions],
            "baseline": rc.plan.manifest.conditions[0].name,  # the manifest's first condition, by convention
            "tasks": [t.id for t in rc.plan.manifest.tasks],
            "runs": [
                {
                    "run_id": run_dir_name(rc.started_at, r, c),
                    "profile": c,
                    "repetition": r,
                    "started_at": _iso(datetime.fromisoformat(rc.started_at.replace("Z", "+00:00")) + timedelta(seconds=r - 1)),
                }
                for c, r in runs
            ],
            "full_run": files.FULL_RUN,
            "note": "real agent runs made by the benchmark runner",
        },
    )
    return obj


def _stderr(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


class RunnerDiskError(RuntimeError):
    """The runs folder (or the output file) could not be written: a full disk, a read-only folder; one line."""


def run_plan(
    plan_: Plan,
    runs_dir: str | os.PathLike,
    output: str | os.PathLike | None = None,
    quiet: bool = False,
    analysis_plan: str | os.PathLike | None = None,
    force: bool = False,
) -> dict:
    """Run (or resume) a plan into ``runs_dir``; returns the ``full_run.json`` object.

    Only one runner works in a runs folder at a time: a second one gets
    :class:`~analysis_lib.core.lock.FolderBusy` before it writes anything. Raises
    :class:`~analysis_lib.bench.journal.PlanMismatchError` when ``runs_dir`` holds a run started with
    another seed, manifest or number of runs, or (unless ``force``) pre-registered with another
    analysis plan; :class:`RunnerDiskError` when the runs folder cannot be written (the run is then
    recorded as ``failed``). ``KeyboardInterrupt`` (Ctrl-C, SIGTERM via the CLI) stops the current
    agent, records the run as ``interrupted`` and propagates.
    """
    runs_path = Path(runs_dir)
    out_path = Path(output) if output is not None else None
    log = (lambda _m: None) if quiet else _stderr
    problems = _adapters.preflight(plan_.manifest)
    if problems:
        raise ValueError("cannot start, nothing ran:\n  " + "\n  ".join(problems))
    # The analysis plan is read (and refused when invalid) before anything runs, and recorded in the
    # run record before the first trial: that record is the pre-registration the reports date.
    a_path = analysis_plan if analysis_plan is not None else plan_mod.default_plan_path()
    a_plan = plan_mod.load_plan(a_path)
    if (a_plan.sequential is None) != (plan_.sequential is None):
        raise ValueError(f"{plan_mod.display_path(a_path)}: the schedule was planned "
                         f"{'without' if plan_.sequential is None else 'with'} the analysis plan's sequential design; "
                         "plan the run with the same analysis plan")
    try:
        with folder_lock(runs_path, what="runs folder", lock_file=state_dir(runs_path) / LOCK_FILE, command="bench", warn=_stderr):
            try:
                return _run_locked(plan_, runs_path, out_path, log, a_path, a_plan, force)
            finally:
                clear_scratch(runs_path)  # each trial removed its own; this removes the runs folder's (empty) one
    except OSError as exc:  # a runs folder that cannot be written before the first trial (read-only, full)
        raise RunnerDiskError(f"cannot write into the runs folder {runs_path}: {_os_reason(exc, runs_path)}") from None


def _os_reason(exc: OSError, runs_dir: Path) -> str:
    """``strerror`` and the file, relative to the runs folder when inside it (no machine path in outputs)."""
    name = exc.filename2 or exc.filename  # a failed copy names its source first, the file being written second
    where = ""
    if name:
        try:
            where = f" ({Path(os.fsdecode(name)).resolve().relative_to(runs_dir.resolve()).as_posix()})"
        except ValueError:
            where = f" ({Path(os.fsdecode(name)).name})"
    return f"{exc.strerror or exc}{where}"


def _check_preregistration(runs_path: Path, a_path, a_plan: plan_mod.AnalysisPlan, force: bool) -> None:
    """Refuse (unless ``force``) to resume with another analysis plan than the one recorded before the first trial."""
    record = plan_mod.lock_path(runs_path)
    if not record.exists():
        return
    try:
        stored = read_json(record, stage="journal")
    except InputError as exc:
        raise PlanMismatchError(f"{exc}; the pre-registration of this run is unreadable") from None
    recorded = stored.get("analysis_plan_sha256") if isinstance(stored, dict) else None
    used = plan_mod.plan_hash(a_plan)
    if recorded == used:
        return
    what = (f"{plan_mod.display_path(record)}: the analysis plan {plan_mod.display_path(a_path)} (sha256 {used[:12]}) differs from "
            f"the one pre-registered before the first trial ({stored.get('plan_source')}, sha256 {str(recorded)[:12]}, "
            f"recorded {stored.get('recorded_at')})")
    if not force:
        raise PlanMismatchError(f"{what}; resume with the pre-registered plan, or pass --force to run on with this one "
                                "(the pre-registration is kept and the reports show the change)")
    _stderr(f"warning: {what}; running on with it (--force): the pre-registration is kept and the reports show the change")


def _run_locked(plan_: Plan, runs_path: Path, out_path: Path | None, log: Callable[[str], None], a_path, a_plan, force: bool) -> dict:
    """:func:`run_plan` once the runs folder's lock is held."""
    # Left by a runner that was killed: trial checkouts and copied logins (scratch), half-written trials (staging).
    n_scratch = clear_scratch(runs_path)
    if n_scratch:
        log(f"removed {n_scratch} trial scratch folder(s) (checkout, agent config, copied login) left by an earlier run")
    shutil.rmtree(state_dir(runs_path) / "staging", ignore_errors=True)
    journal = Journal(runs_path)
    requested = plan_.to_json()
    journal.check_plan(requested, ("seed", "manifest_sha256", "runs_per_condition", "schedule", "sequential"))
    _check_preregistration(runs_path, a_path, a_plan, force)
    stored = journal.load_plan()
    started_at = stored["started_at"] if stored else _iso(_now().replace(microsecond=0))
    if stored is None:
        journal.save_plan({**requested, "started_at": started_at})
    if plan_mod.write_preregistration(runs_path, a_plan, plan_mod.display_path(a_path)) is not None:
        log(
            f"analysis plan {plan_mod.display_path(a_path)} (sha256 {plan_mod.plan_hash(a_plan)[:12]}) recorded "
            f"in {plan_mod.display_path(plan_mod.lock_path(runs_path))} before the first trial"
        )
    m = plan_.manifest
    tcommit, tool_warnings = tool_commit(m.environment.tool_commit, m.resolve(m.environment.tool_repo) if m.environment.tool_repo else None)
    for w in tool_warnings:
        log(f"warning: {w}")
    rc = _RunContext(plan_, runs_path, started_at, tcommit, log, tool_warnings)
    guard = BudgetGuard(plan_.phase_budget_usd, m.budget.estimated_cost_per_trial_usd)
    done = journal.records()
    for rec in sorted(done.values(), key=lambda r: (r["pair"], r["position"])):
        guard.record(rec.get("cost_usd"))
    if done:
        log(f"resuming: {len(done)} of {len(plan_._entries)} trials already finished in {runs_path}")
    n_total = len(plan_._entries)
    seq = None
    try:
        _write_outputs(rc, done, guard, "running", out_path)
        seq = _Sequential(rc, a_plan, guard) if plan_.sequential is not None else None
        for group in pairs(plan_._entries):
            if seq is not None and seq.stopped:
                break
            missing = [e for e in group if trial_key(e) not in done]
            if missing and not guard.check_pair(group[0]["pair"], len(missing)):
                log(f"budget stop: {guard.stop_reason}")
                break
            for e in missing:
                check_stop()
                rec = run_trial(rc, e)
                guard.record(rec.get("cost_usd"))
                journal.write(rec["key"], rec)
                done[rec["key"]] = rec
                cost = "cost unknown" if rec.get("cost_usd") is None else f"${rec['cost_usd']:.4f}"
                log(
                    f"[{len(done)}/{n_total}] pair {e['pair']} run {e['run']} {e['condition']} {e['task_id']}: {rec['status']}, {rec['outcome']} ({cost})"
                )
                agent = rec.get("agent") or {}
                tail = (agent.get("stderr_tail") or "").splitlines()
                why = agent.get("error") or (tail[-1] if tail else None) or rec.get("setup_error")
                if rec["status"] != "completed" and why:
                    log(f"    {why}")
                elif rec.get("outcome") == "evaluation_error":
                    log(f"    evaluation error: {(rec.get('evaluation') or {}).get('error')}")
                for w in rec.get("warnings") or []:
                    log(f"    warning: {w}")
                _write_outputs(rc, done, guard, "running", out_path)
            if seq is not None:
                seq.after_pair(group[0]["pair"], done)
                if seq.stopped:
                    _write_outputs(rc, done, guard, "running", out_path)
        if seq is not None and not seq.stopped:
            seq.final(done, "budget" if guard.stopped else None)
        check_stop()
    except KeyboardInterrupt:
        _write_outputs(rc, done, guard, "interrupted", out_path)
        log(f"interrupted: {len(done)} of {n_total} trials finished; re-run the same command to resume")
        raise
    except OSError as exc:
        # A full disk or a folder turned read-only: the cut trial's staging folder is debris (it runs again on
        # resume) and removing it may free the room the run record needs; then the run is recorded as failed.
        shutil.rmtree(state_dir(runs_path) / "staging", ignore_errors=True)
        why = (f"{_os_reason(exc, runs_path)}; {len(done)} of {n_total} trials finished and journaled; "
               "make room and re-run the same command to resume")
        _record_failure(rc, done, guard, out_path, f"cannot write into the runs folder: {why}")  # no machine path in outputs
        raise RunnerDiskError(f"cannot write into the runs folder {runs_path}: {why}") from None
    # Staging folders of trials cut short and never re-run (e.g. after a budget stop) are debris now.
    shutil.rmtree(state_dir(runs_path) / "staging", ignore_errors=True)
    status = "sequential_stop" if seq is not None and seq.stopped_early else ("budget_stop" if guard.stopped else "complete")
    final = _write_outputs(rc, done, guard, status, out_path)
    for w in final["environment_warnings"]:
        log(f"warning: environment: {w}")
    return final


def _record_failure(rc: _RunContext, done: dict[str, dict], guard: BudgetGuard, out_path: Path | None, line: str) -> None:
    """Write ``status: failed`` and the reason wherever it still fits: the runs folder's record, then ``--output``."""
    for target in (None, out_path) if out_path is not None else (None,):
        try:
            _write_outputs(rc, done, guard, "failed", target, error=line, runs_copy=target is None)
        except OSError:
            continue


class _Sequential:
    """The interim looks of a run: due after the declared share of tasks (or of spend), journaled, resumable."""

    def __init__(self, rc: _RunContext, a_plan: plan_mod.AnalysisPlan, guard: BudgetGuard):
        self.rc, self.a_plan, self.guard = rc, a_plan, guard
        self.design = a_plan.sequential
        self.order = task_order(rc.plan._entries)
        self.n_tasks = len(self.order)
        self.conditions = [c.name for c in rc.plan.manifest.conditions]
        # The pair that completes each task (the schedule runs a task's pairs back to back).
        self.last_pair = {e["task_id"]: e["pair"] for e in rc.plan._entries}
        rc.looks = looks_mod.load_looks(rc.runs_dir)
        self.stopped = bool(rc.looks) and rc.looks[-1]["decision"] != "continue"
        self.stopped_early = self.stopped and rc.looks[-1]["decision"] not in ("final", "budget")
        if self.stopped_early:
            self._mark_stop()
            rc.log(f"sequential stop already recorded at look {rc.looks[-1]['look']}: {rc.looks[-1].get('reason')}")

    def _complete(self, done: dict[str, dict]) -> int:
        """Tasks complete in schedule order (a prefix of the task order)."""
        keys = {}
        for e in self.rc.plan._entries:
            keys.setdefault(e["task_id"], []).append(trial_key(e))
        n = 0
        for t in self.order:
            if not all(k in done for k in keys[t]):
                break
            n += 1
        return n

    def _due(self, n_complete: int) -> bool:
        seen = {lk["tasks"] for lk in self.rc.looks}
        if n_complete == 0 or n_complete in seen:
            return False
        if n_complete == self.n_tasks:
            return True
        if self.design.timing == "tasks":
            return n_complete in self.rc.plan.sequential["look_tasks"]
        # Spend timing: the next declared share of the guardrail has been spent since the last look.
        limits = self.rc.plan.sequential["look_spend_usd"]
        passed = sum(1 for x in limits if self.guard.spent_usd >= x - 1e-9)
        return passed > len(self.rc.looks)

    def after_pair(self, pair: int, done: dict[str, dict]) -> None:
        task = next(e["task_id"] for e in self.rc.plan._entries if e["pair"] == pair)
        if self.last_pair[task] != pair:
            return
        n = self._complete(done)
        if self._due(n):
            self._look(n, done, final=n == self.n_tasks, ended_by=None)

    def final(self, done: dict[str, dict], ended_by: str | None) -> None:
        """The final analysis when the schedule ran out or the budget ended it (all remaining alpha)."""
        n = self._complete(done)
        if n == 0 or (self.rc.looks and self.rc.looks[-1]["decision"] != "continue"):
            return
        if self.rc.looks and self.rc.looks[-1]["tasks"] == n:
            self.rc.looks.pop()  # the final analysis replaces the interim look on the same data
        self._look(n, done, final=True, ended_by=ended_by)

    def _look(self, n: int, done: dict[str, dict], *, final: bool, ended_by: str | None) -> None:
        looks = self.rc.looks
        sizes = [lk["tasks"] for lk in looks] + [n]
        times = [lk.get("at") for lk in looks] + [_iso(_now())]
        spent = [lk.get("spent_usd") for lk in looks] + [round(self.guard.spent_usd, 6)]
        mon = looks_mod.run_look(self.rc.runs_dir, self.a_plan, self.conditions, self.order, sizes, self.n_tasks,
                                 list(done.values()), final=final, ended_by=ended_by, times=times, spent=spent)
        self.rc.looks = mon.looks
        looks_mod.save_looks(self.rc.runs_dir, self.rc.looks)
        rec = self.rc.looks[-1]
        stats_ = "; ".join(f"{h['metric']} ({h['profile_b']} vs {h['profile_a']}) p={_p(h['p_value'])} "
                           f"boundary p<={_p(h['nominal_p'])}: {h['status']}" for h in rec["hypotheses"])
        self.rc.log(f"look {rec['look']} ({n} of {self.n_tasks} tasks, ${self.guard.spent_usd:.2f} spent): {stats_}; "
                    f"{rec['decision']}" + (f": {rec['reason']}" if rec.get("reason") else ""))
        if rec["decision"] != "continue":
            self.stopped = True
            self.stopped_early = rec["decision"] not in ("final", "budget")
            if self.stopped_early:
                self._mark_stop()

    def _mark_stop(self) -> None:
        n = self.rc.looks[-1]["tasks"]
        later = [e["pair"] for e in self.rc.plan._entries if e["task_id"] in set(self.order[n:])]
        self.rc.seq_stop_pair = min(later) if later else None


def _p(x) -> str:
    return "–" if x is None else f"{x:.4g}"


def dry_run_json(plan_: Plan) -> dict:
    """What ``--dry-run`` writes: the plan (seed, schedule, projection), marked as not run.

    ``preflight`` lists what would stop a real run from starting (see :func:`adapters.preflight`).
    """
    return {**plan_.to_json(), "kind": "bench_plan", "dry_run": True, "status": "planned", "preflight": _adapters.preflight(plan_.manifest)}


def default_runs_dir(manifest: Manifest) -> Path:
    return Path("runs") / f"bench-{manifest.name}"


def run_full(
    manifest_path: str | os.PathLike | Manifest,
    runs_per_condition: int = 3,
    seed: int = 0,
    phase_budget_usd: float = 1200.0,
    output: str | os.PathLike | None = "results/full_run.json",
    runs_dir: str | os.PathLike | None = None,
    dry_run: bool = False,
    quiet: bool = False,
    analysis_plan: str | os.PathLike | None = None,
    force: bool = False,
) -> dict:
    """Plan and run (or, with ``dry_run``, only plan and write) a full benchmark; returns the JSON written.

    A dry run writes ``{"kind": "bench_plan", "dry_run": true, "seed", "schedule", "projection", ...}``
    to ``output`` and runs nothing. Otherwise see :func:`run_plan` (resumable: the same call after a
    crash runs only the missing trials).
    """
    a_plan = plan_mod.load_plan(analysis_plan if analysis_plan is not None else plan_mod.default_plan_path())
    if isinstance(manifest_path, Manifest):
        p = make_plan(manifest_path, runs_per_condition, seed, phase_budget_usd, None, a_plan)
    else:
        p = plan(manifest_path, runs_per_condition, seed, phase_budget_usd, a_plan)
    if dry_run:
        obj = dry_run_json(p)
        if output is not None:
            atomic_write_json(output, obj)
        return obj
    return run_plan(p, runs_dir if runs_dir is not None else default_runs_dir(p.manifest), output, quiet=quiet,
                    analysis_plan=analysis_plan, force=force)


def spike_manifest(
    task_id: str,
    repo_path: str,
    manifest_path: str | None = None,
    instruction: str | None = None,
    model: str | None = None,
    mcp_config: str | None = None,
    claude_bin: str = "claude",
    permission_mode: str | None = "bypassPermissions",
    allowed_tools: list[str] | None = None,
) -> Manifest:
    """A one-task manifest for a spike: the task from ``manifest_path`` (if given) at ``repo_path``'s HEAD.

    Without a manifest: two Claude Code conditions, ``baseline`` (no MCP) and ``mcp`` (``mcp_config``).
    """
    head = git_commit(repo_path)
    if head is None:
        raise ValueError(f"repo_path: {repo_path} is not a git checkout")
    # Kept as given (relative to the current folder): outputs must not carry this machine's paths.
    repo = str(repo_path)
    if manifest_path:
        m = load_manifest(manifest_path)
        t = m.task(task_id)
        obj = m.to_json()
        obj["tasks"] = [
            {
                **t.model_dump(mode="json", exclude_none=True),
                "repo": repo,
                "commit": head,
                **({"instruction": instruction} if instruction else {}),
            }
        ]
        if model:
            obj["environment"]["model"] = model
        # Re-anchor relative paths (mcp configs, tool_repo) to the original manifest's folder.
        return parse_manifest(obj, str(manifest_path), base_dir=m.base_dir)
    if not instruction:
        raise ValueError("instruction: required for a spike without --manifest")
    if not mcp_config:
        raise ValueError("mcp_config: required for a spike without --manifest (the treatment condition's MCP config)")
    task: dict[str, Any] = {"id": task_id, "repo": repo, "commit": head, "instruction": instruction}
    common = {"claude_bin": claude_bin, "permission_mode": permission_mode, "allowed_tools": list(allowed_tools or [])}
    obj = {
        "manifest_version": 2,
        "name": "spike",
        "environment": {"model": model or DEFAULT_MODEL},
        "conditions": [
            {"name": "baseline", "adapter": "claude_code", "settings": common},
            {"name": "mcp", "adapter": "claude_code", "settings": {**common, "mcp_config": str(mcp_config)}},
        ],
        "tasks": [task],
    }
    return parse_manifest(obj, "<spike>", base_dir=None)


def run_spike(
    m: Manifest,
    manifest_path: str | None = None,
    runs_dir: str | os.PathLike | None = None,
    output: str | os.PathLike | None = None,
    seed: int = 0,
    phase_budget_usd: float = 50.0,
    quiet: bool = False,
) -> dict:
    """One task, every condition, one run each (``m`` from :func:`spike_manifest`): the smoke test before spending on a full run."""
    rd = Path(runs_dir) if runs_dir is not None else Path("runs") / f"spike-{m.tasks[0].id}"
    return run_plan(make_plan(m, 1, seed, phase_budget_usd, manifest_path), rd, output, quiet=quiet)
