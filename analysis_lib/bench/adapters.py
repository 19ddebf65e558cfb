"""Agent adapters: run one agent on one task checkout and leave its trace in the trial folder.

- ``claude_code``: ``claude -p INSTRUCTION --output-format stream-json --verbose --model PINNED
  --strict-mcp-config [--mcp-config FILE]``; stdout is kept as ``agent/claude-code.txt`` (Harbor's
  name for it) and converted to ATIF ``agent/trajectory.json``.
- ``command``: any agent from an argv template; stdout is Claude stream-json, or the agent writes
  ATIF to ``{trial_dir}/agent/trajectory.json`` itself.
- ``harbor``: ``harbor run`` for one task (``--path`` or ``--dataset`` + ``--include-task-name``); its job directory is ingested (the trial's ``agent/``,
  ``verifier/`` and ``result.json`` copied) and Harbor's own verifier reward is the verdict.
- mcpbr result files are imported as trials with :func:`import_mcpbr`.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..core.fileio import atomic_write_bytes, atomic_write_json, iter_jsonl, read_json
from ..core.trial import InputError, Trial
from ..ingest.atif import parse_trajectory
from ..ingest.claude_code import model_usage_totals, stream_json_to_atif, transcript_to_atif
from ..ingest.mcpbr import read_mcpbr_results
from ..metrics.trial_metrics import trial_cost
from .environment import program_version
from .manifest import ClaudeCodeCondition, ClaudeCodeSettings, CommandCondition, HarborCondition, Manifest, Task, is_url
from .process import run_process, substitute

# Where the task checkout appears in saved traces: temp folders differ per trial, and file paths
# must be comparable across trials (files read/edited) and free of this machine's paths.
CHECKOUT_PLACEHOLDER = "/workspace/repo"


@dataclass
class TrialContext:
    """Everything an adapter needs for one scheduled trial."""

    manifest: Manifest
    task: Task
    condition: Any  # one of the manifest's condition models
    trial_dir: Path  # staging folder; adapters write agent/ (and harbor: verifier/, result.json)
    workdir: Path | None  # the task checkout (None for harbor)
    values: dict[str, str]  # placeholder values for argv templates
    env: dict[str, str]


@dataclass
class AgentOutcome:
    """What the adapter learned from running the agent."""

    adapter: str
    adapter_version: str
    exit_code: int | None = None
    timed_out: bool = False
    error: str | None = None
    duration_sec: float | None = None
    cost_usd: float | None = None
    n_input_tokens: int | None = None  # ATIF semantics: includes cached tokens
    n_cache_tokens: int | None = None
    n_output_tokens: int | None = None
    model_reported: str | None = None
    mcp_servers: list[str] | None = None  # as the agent reported them at start (Claude Code init event)
    # Treatment trials only (None otherwise): did MCP tools reach the model, did it use one (not denied)?
    mcp_exposed: bool | None = None
    mcp_used: bool | None = None
    permission_denials: list[str] = field(default_factory=list)  # tool names Claude Code refused to run
    token_source: str | None = None  # "transcript", "modelUsage", "usage" (main thread only) or None
    cost_source: str | None = None  # "agent" (reported) or "estimate" (priced from the tokens)
    stderr_tail: str | None = None  # last lines of the agent's stderr when it failed
    trajectory: bool = False
    warnings: list[str] = field(default_factory=list)
    # Harbor only: the verifier's reward and the trial's own result.json
    reward: float | None = None
    harbor_result: dict | None = None


# -- Claude Code stream-json --------------------------------------------------------------------


def stream_summary(path: str | os.PathLike) -> dict[str, Any]:
    """Init and result facts of a Claude Code stream-json file (model, version, cost, usage)."""
    out: dict[str, Any] = {}
    try:
        for _, ev in iter_jsonl(path, stage="agent"):
            if not isinstance(ev, dict):
                continue
            if ev.get("type") == "system" and ev.get("subtype") == "init" and "model" not in out:
                out["model"] = ev.get("model")
                out["claude_code_version"] = ev.get("claude_code_version")
                out["mcp_servers"] = ev.get("mcp_servers")
                out["session_id"] = ev.get("session_id")
                out["tools"] = ev.get("tools")
            elif ev.get("type") == "result":
                # Background work (a subagent finishing later) adds results; the last is cumulative.
                out["result"] = ev
                for d in ev.get("permission_denials") or []:
                    if isinstance(d, dict) and d.get("tool_use_id") not in {
                        x.get("tool_use_id") for x in out.setdefault("permission_denials", [])
                    }:
                        out["permission_denials"].append(d)
    except InputError as exc:
        out["error"] = str(exc)
    return out


def _apply_stream_summary(outcome: AgentOutcome, summary: dict[str, Any]) -> None:
    res = summary.get("result") or {}
    cost = res.get("total_cost_usd", res.get("cost_usd"))
    if isinstance(cost, (int, float)) and not isinstance(cost, bool):
        outcome.cost_usd = float(cost)
    if outcome.cost_usd is not None:
        outcome.cost_source = "agent"
    # modelUsage covers every model the session called (subagents too); usage only the main thread.
    usage, source = model_usage_totals(res.get("modelUsage")), "modelUsage"
    if usage is None:
        usage, source = res.get("usage") or {}, "usage"
    if usage:
        _set_tokens(outcome, usage, source)
    outcome.model_reported = summary.get("model") or outcome.model_reported
    # A treatment whose MCP server failed to start is a baseline in disguise: say so on the trial.
    # "pending" means still starting when the session began; whether it was used is checked later.
    for srv in summary.get("mcp_servers") or []:
        if isinstance(srv, dict) and srv.get("status") not in (None, "connected", "pending"):
            outcome.warnings.append(f"MCP server {srv.get('name')} status {srv.get('status')}")
    outcome.mcp_servers = [s.get("name") for s in summary.get("mcp_servers") or [] if isinstance(s, dict)]
    denials = summary.get("permission_denials") or []
    outcome.permission_denials = [str(d.get("tool_name")) for d in denials]
    if denials:
        outcome.warnings.append(
            f"Claude Code denied {len(denials)} tool call(s) for lack of permission ({', '.join(sorted(set(outcome.permission_denials)))}): "
            "set the condition's permission_mode or allowed_tools"
        )
    if res.get("is_error"):
        outcome.warnings.append(f"agent reported an error result ({res.get('subtype')})")
    if "result" not in summary:
        outcome.warnings.append("stream-json has no final result event (cost unknown)")


def _set_tokens(outcome: AgentOutcome, usage: dict[str, Any], source: str) -> None:
    """Anthropic token totals -> ATIF/Harbor semantics (n_input_tokens includes cache reads and writes)."""
    cached = int(usage.get("cache_read_input_tokens") or 0)
    created = int(usage.get("cache_creation_input_tokens") or 0)
    outcome.n_input_tokens = int(usage.get("input_tokens") or 0) + cached + created
    outcome.n_cache_tokens = cached
    outcome.n_output_tokens = int(usage.get("output_tokens") or 0)
    outcome.token_source = source


def _write_atif(convert: Callable[[], dict], failure: str, trajectory_path: Path, outcome: AgentOutcome) -> dict | None:
    """``convert()`` written to ``trajectory_path``; a failure is a warning (``failure: error``), the raw file stays."""
    try:
        atif = convert()
    except Exception as exc:  # the converter's failure must not lose the paid-for run
        outcome.warnings.append(f"{failure}: {type(exc).__name__}: {exc}")
        return None
    atomic_write_json(trajectory_path, atif)
    outcome.trajectory = True
    return atif


def convert_stream(stream_path: Path, trajectory_path: Path, outcome: AgentOutcome, prompt: str | None = None) -> dict | None:
    """Convert stream-json to ATIF with the project's converter; a failure is a warning, the raw file stays."""
    return _write_atif(
        lambda: stream_json_to_atif(str(stream_path), prompt=prompt), f"{stream_path.name}: conversion to ATIF failed", trajectory_path, outcome
    )


def convert_transcript(transcript: Path, trajectory_path: Path, outcome: AgentOutcome) -> dict | None:
    """Convert a kept session transcript (subagents beside it) to ATIF; a failure is a warning."""
    return _write_atif(
        lambda: transcript_to_atif(transcript), f"{transcript.name}: conversion of the session transcript failed", trajectory_path, outcome
    )


# Where the trial's own Claude Code config folder appears in saved traces (never this machine's path).
CONFIG_PLACEHOLDER = "~/.claude"


def _path_swaps(workdir: Path | None, config_dir: Path | None = None) -> list[tuple[bytes, bytes]]:
    """(machine path, placeholder) pairs, longest first: the checkout and the trial's config folder.

    Claude Code also names folders after the checkout with every ``/`` and ``.`` as ``-``
    (``projects/-tmp-bench-x-repo``); that form is rewritten too.
    """
    swaps: dict[str, str] = {}
    for root, placeholder in ((workdir, CHECKOUT_PLACEHOLDER), (config_dir, CONFIG_PLACEHOLDER)):
        if root is None:
            continue
        for form in {str(root), os.path.realpath(root)}:
            swaps[form] = placeholder
            swaps[form.replace("/", "-").replace(".", "-")] = placeholder.replace("/", "-").replace(".", "-").replace("~", "")
    return [(k.encode(), v.encode()) for k, v in sorted(swaps.items(), key=lambda kv: len(kv[0]), reverse=True)]


def _normalise_paths(path: Path, workdir: Path | None, config_dir: Path | None = None) -> None:
    """Rewrite the temp checkout's absolute path to :data:`CHECKOUT_PLACEHOLDER` (and the trial's
    config folder to :data:`CONFIG_PLACEHOLDER`) inside a saved trace."""
    if (workdir is None and config_dir is None) or not path.exists():
        return
    data = path.read_bytes()
    new = data
    for old, rep in _path_swaps(workdir, config_dir):
        new = new.replace(old, rep)
    if new != data:
        atomic_write_bytes(path, new)


STDERR_TAIL_CHARS = 2000


def _run_streaming_agent(
    argv: list[str],
    ctx: TrialContext,
    outcome: AgentOutcome,
    stdout_name: str,
    env: dict[str, str] | None = None,
    config_dir: Path | None = None,
) -> Path:
    agent_dir = ctx.trial_dir / "agent"
    agent_dir.mkdir(parents=True, exist_ok=True)
    out_path = agent_dir / stdout_name
    with open(out_path, "wb") as out, open(agent_dir / "stderr.txt", "wb") as err:
        res = run_process(argv, cwd=ctx.workdir, env=env or ctx.env, timeout=ctx.task.timeout_seconds, stdout=out, stderr=err,
                          supervise=True)
    outcome.exit_code, outcome.timed_out, outcome.error = res.returncode, res.timed_out, res.error
    outcome.duration_sec = round(res.duration_sec, 3)
    _note_leftovers(outcome, res.leftovers)
    if not (agent_dir / "stderr.txt").stat().st_size:
        (agent_dir / "stderr.txt").unlink()
    _normalise_paths(out_path, ctx.workdir, config_dir)
    _normalise_paths(agent_dir / "stderr.txt", ctx.workdir, config_dir)
    if (agent_dir / "stderr.txt").exists() and (res.error or res.timed_out or res.returncode not in (0, None)):
        outcome.stderr_tail = (agent_dir / "stderr.txt").read_bytes()[-STDERR_TAIL_CHARS:].decode("utf-8", "replace").strip() or None
    return out_path


def _note_leftovers(outcome: AgentOutcome, n: int) -> None:
    """A trial warning when the agent left processes running at its end (they were ended before the next trial)."""
    if n:
        outcome.warnings.append(f"the agent left {n} process(es) running when it exited; they were stopped at the end of the trial")


def _user_config_dir() -> Path:
    return Path(os.environ.get("CLAUDE_CONFIG_DIR") or Path.home() / ".claude")


def claude_env(ctx: TrialContext, config_dir: Path | None) -> dict[str, str]:
    """The agent's environment: its own config folder, no auto-update, root allowed to bypass permissions.

    Claude Code refuses ``bypassPermissions`` under root unless ``IS_SANDBOX=1``: a benchmark
    trial runs in a throw-away checkout, so the runner sets it there (only for that mode, only as root).
    """
    s = ctx.condition.settings
    env = dict(ctx.env)
    env.setdefault("DISABLE_AUTOUPDATER", "1")
    if config_dir is not None:
        config_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        # A user logged in with a Claude account (no API key) keeps working: only the credentials come along.
        cred = _user_config_dir() / ".credentials.json"
        if cred.is_file() and not (config_dir / ".credentials.json").exists():
            copy_private(cred, config_dir / ".credentials.json")
        env["CLAUDE_CONFIG_DIR"] = str(config_dir)
        # Task outputs of background subagents go to /tmp/claude-<uid>/ otherwise, and stay there.
        env["CLAUDE_CODE_TMPDIR"] = str(config_dir / "tmp")
        (config_dir / "tmp").mkdir(exist_ok=True)
    if permission_mode(s) == "bypassPermissions" and hasattr(os, "geteuid") and os.geteuid() == 0:
        env["IS_SANDBOX"] = "1"
    return env


def copy_private(src: Path, dest: Path) -> None:
    """Copy a secret so that ``dest`` is readable by this user only from its first byte (created 0600, never through a link)."""
    fd = os.open(dest, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o600)
    with os.fdopen(fd, "wb") as out, open(src, "rb") as fh:
        shutil.copyfileobj(fh, out)


def permission_mode(s: ClaudeCodeSettings) -> str | None:
    """The mode the agent runs in: a ``--permission-mode`` in ``extra_args`` wins over the setting."""
    extra = list(s.extra_args)
    if "--dangerously-skip-permissions" in extra:
        return "bypassPermissions"
    for i, a in enumerate(extra):
        if a == "--permission-mode" and i + 1 < len(extra):
            return extra[i + 1]
        if a.startswith("--permission-mode="):
            return a.split("=", 1)[1]
    return s.permission_mode


def claude_argv(ctx: TrialContext) -> list[str]:
    """``claude -p`` with the fixed flags, the condition's MCP config, permissions and extra args."""
    s = ctx.condition.settings
    argv = [
        s.claude_bin,
        "-p",
        ctx.task.instruction,
        "--output-format",
        "stream-json",
        "--verbose",
        "--model",
        ctx.manifest.environment.model,
    ]
    # --strict-mcp-config on both sides: the baseline gets no MCP server at all, not the user's defaults.
    argv.append("--strict-mcp-config")
    if s.mcp_config:
        argv += ["--mcp-config", os.path.abspath(ctx.manifest.resolve(s.mcp_config))]
    if s.permission_mode and not any(a.startswith("--permission-mode") or a == "--dangerously-skip-permissions" for a in s.extra_args):
        argv += ["--permission-mode", s.permission_mode]
    if s.allowed_tools:
        argv += ["--allowedTools", ",".join(s.allowed_tools)]
    return argv + substitute(s.extra_args, ctx.values)


def keep_transcript(config_dir: Path, session_id: str | None, agent_dir: Path, workdir: Path | None) -> Path | None:
    """Copy the session transcript (and its subagents) from the trial's config folder into ``agent/sessions/``.

    The copy is the trial's exact token record (subagents, killed trials); machine paths are scrubbed.
    """
    files = sorted((config_dir / "projects").glob("*/*.jsonl"), key=lambda p: p.stat().st_mtime)
    chosen = [f for f in files if f.stem == session_id] or files[-1:]
    if not chosen:
        return None
    src = chosen[0]
    dest_dir = agent_dir / "sessions"
    dest_dir.mkdir(parents=True, exist_ok=True)
    dest = dest_dir / src.name
    shutil.copyfile(src, dest)
    copied = [dest]
    subs = src.with_suffix("") / "subagents"
    if subs.is_dir():
        shutil.copytree(subs, dest_dir / src.stem / "subagents", dirs_exist_ok=True)
        copied += [p for p in (dest_dir / src.stem / "subagents").iterdir() if p.is_file()]
    for p in copied:
        _normalise_paths(p, workdir, config_dir)
    return dest


def _mcp_exposure(outcome: AgentOutcome, summary: dict[str, Any], atif: dict | None) -> None:
    """Measured, not assumed: did the MCP tools reach the model (init), did it call one that ran?"""
    servers = [s for s in summary.get("mcp_servers") or [] if isinstance(s, dict)]
    offered = [t for t in summary.get("tools") or [] if isinstance(t, str) and t.startswith("mcp__")]
    used = False
    if atif is not None:
        for t in (atif, *atif.get("subagent_trajectories", [])):
            for step in t.get("steps", []):
                denied = {
                    r.get("source_call_id")
                    for r in (step.get("observation") or {}).get("results", [])
                    if (r.get("extra") or {}).get("permission_denied")
                }
                used = used or any(
                    str(c.get("function_name", "")).startswith("mcp__") and c.get("tool_call_id") not in denied
                    for c in step.get("tool_calls") or []
                )
    outcome.mcp_used = used
    outcome.mcp_exposed = bool(offered) or any(s.get("status") == "connected" for s in servers) or used
    for srv in servers:
        if srv.get("status") == "pending" and not used:
            outcome.warnings.append(f"MCP server {srv.get('name')} was still pending at start and no MCP tool ran")
    if not outcome.mcp_exposed:
        outcome.warnings.append("no MCP tool reached the model (none offered at start, none used): in effect a baseline trial")
    elif not used:
        outcome.warnings.append("MCP tools were offered but never used")


def _estimate_cost(atif: dict, model: str | None = None) -> float | None:
    """USD of the trajectory's tokens by the analysis' own path (:func:`analysis_lib.metrics.trial_metrics.trial_cost` of a trial
    holding it, ``model`` as its model name): the cost the analysis reports for this trial, to the last digit;
    None when a model is unpriced."""
    trial = Trial("", "", 0, "", "", "run_layout", trajectory=parse_trajectory(atif), metadata={"model_name": model})
    return trial_cost(trial)[0]


def run_claude_code(ctx: TrialContext) -> AgentOutcome:
    cond: ClaudeCodeCondition = ctx.condition
    s = cond.settings
    argv = claude_argv(ctx)
    outcome = AgentOutcome("claude_code", program_version([s.claude_bin, "--version"]))
    config_dir = None
    if s.isolate_config:
        config_dir = (ctx.workdir.parent if ctx.workdir is not None else ctx.trial_dir.parent) / f".claude-config-{ctx.trial_dir.name}"
    try:
        stream = _run_streaming_agent(argv, ctx, outcome, "claude-code.txt", claude_env(ctx, config_dir), config_dir)
        summary = stream_summary(stream)
        _apply_stream_summary(outcome, summary)
        if s.mcp_config and outcome.error is None and summary and not outcome.mcp_servers:
            outcome.warnings.append("an MCP config was given but the agent reported no MCP server")
        if summary.get("claude_code_version") and outcome.adapter_version == "unknown":
            outcome.adapter_version = str(summary["claude_code_version"])
        traj_path = ctx.trial_dir / "agent" / "trajectory.json"
        transcript = keep_transcript(config_dir, summary.get("session_id"), ctx.trial_dir / "agent", ctx.workdir) if config_dir else None
        atif = None
        if transcript is not None:
            atif = convert_transcript(transcript, traj_path, outcome)
            if atif is not None:
                fm = atif.get("final_metrics") or {}
                extra = fm.get("extra") or {}
                if "total_prompt_tokens" in fm:
                    usage = {
                        "input_tokens": extra.get("total_input_tokens", 0),
                        "cache_read_input_tokens": fm.get("total_cached_tokens", 0),
                        "cache_creation_input_tokens": extra.get("total_cache_creation_input_tokens", 0),
                        "output_tokens": fm.get("total_completion_tokens", 0),
                    }
                    reported = outcome.n_input_tokens, outcome.n_output_tokens
                    _set_tokens(outcome, usage, "transcript")
                    if reported[0] is not None and reported != (outcome.n_input_tokens, outcome.n_output_tokens) and summary.get("result"):
                        outcome.warnings.append(
                            f"tokens: transcript {outcome.n_input_tokens} in / {outcome.n_output_tokens} out, "
                            f"result event {reported[0]} in / {reported[1]} out (the transcript is used)"
                        )
        if atif is None and outcome.error is None and stream.stat().st_size:
            atif = convert_stream(stream, traj_path, outcome, prompt=ctx.task.instruction)
        if atif is not None:
            _normalise_paths(traj_path, ctx.workdir, config_dir)
            if outcome.cost_usd is None:
                outcome.cost_usd = _estimate_cost(atif, ctx.manifest.environment.model)
                if outcome.cost_usd is not None:
                    outcome.cost_source = "estimate"
                    outcome.warnings.append(
                        f"no cost reported by the agent: ${outcome.cost_usd:.4f} estimated from the {outcome.token_source} tokens"
                    )
        if s.mcp_config and outcome.error is None:
            _mcp_exposure(outcome, summary, atif)
    finally:
        if config_dir is not None:
            shutil.rmtree(config_dir, ignore_errors=True)
    return outcome


def run_command(ctx: TrialContext) -> AgentOutcome:
    cond: CommandCondition = ctx.condition
    s = cond.settings
    version = program_version(substitute(s.version_command, ctx.values)) if s.version_command else "unknown"
    outcome = AgentOutcome("command", version)
    argv = substitute(s.command, ctx.values)
    stdout_name = "claude-code.txt" if s.output == "stream_json" else "stdout.txt"
    stream = _run_streaming_agent(argv, ctx, outcome, stdout_name)
    traj = ctx.trial_dir / "agent" / "trajectory.json"
    if s.output == "stream_json":
        summary = stream_summary(stream)
        _apply_stream_summary(outcome, summary)
        if outcome.error is None and stream.stat().st_size:
            convert_stream(stream, traj, outcome)
    elif s.output == "atif":
        if traj.exists():
            outcome.trajectory = True
            try:
                fm = read_json(traj, stage="agent").get("final_metrics") or {}
                cost = fm.get("total_cost_usd")
                outcome.cost_usd = float(cost) if isinstance(cost, (int, float)) else None
                outcome.n_input_tokens = fm.get("total_prompt_tokens")
                outcome.n_cache_tokens = fm.get("total_cached_tokens")
                outcome.n_output_tokens = fm.get("total_completion_tokens")
            except (InputError, AttributeError) as exc:
                outcome.warnings.append(f"agent/trajectory.json: unreadable ({exc})")
        else:
            outcome.warnings.append("agent wrote no agent/trajectory.json")
    _normalise_paths(traj, ctx.workdir)
    return outcome


def harbor_argv(ctx: TrialContext, jobs_dir: Path, job_name: str) -> list[str]:
    """``harbor run`` for one task (flags as Harbor 0.25's own parser accepts them: a dataset's task is
    chosen with ``--include-task-name``)."""
    s = ctx.condition.settings
    if s.dataset:
        where = ["--dataset", s.dataset, "--include-task-name", ctx.task.id]
    else:
        where = ["--path", os.path.abspath(ctx.manifest.resolve(ctx.task.repo))]
    return [
        s.harbor_bin,
        "run",
        *where,
        "--agent",
        s.agent,
        "--model",
        ctx.manifest.environment.model,
        "--job-name",
        job_name,
        "--jobs-dir",
        str(jobs_dir),
        *substitute(s.extra_args, ctx.values),
    ]


def run_harbor(ctx: TrialContext) -> AgentOutcome:
    cond: HarborCondition = ctx.condition
    s = cond.settings
    outcome = AgentOutcome("harbor", program_version([s.harbor_bin, "--version"]))
    jobs_dir = ctx.trial_dir.parent / f"{ctx.trial_dir.name}.harbor-jobs"
    shutil.rmtree(jobs_dir, ignore_errors=True)
    job_name = f"{ctx.values['condition']}__{ctx.values['pair']}"
    argv = harbor_argv(ctx, jobs_dir, job_name)
    (ctx.trial_dir / "agent").mkdir(parents=True, exist_ok=True)
    with open(ctx.trial_dir / "agent" / "harbor-stdout.txt", "wb") as out, open(ctx.trial_dir / "agent" / "stderr.txt", "wb") as err:
        res = run_process(argv, env=ctx.env, timeout=ctx.task.timeout_seconds, stdout=out, stderr=err, supervise=True)
    outcome.exit_code, outcome.timed_out, outcome.error = res.returncode, res.timed_out, res.error
    outcome.duration_sec = round(res.duration_sec, 3)
    _note_leftovers(outcome, res.leftovers)
    try:
        ingest_harbor_trial(jobs_dir / job_name, ctx.trial_dir, outcome)
    finally:
        shutil.rmtree(jobs_dir, ignore_errors=True)
    if outcome.harbor_result is not None:
        # Harbor records absolute host paths (trial_uri, trials_dir, task path): keep them out of outputs.
        swaps = {os.path.realpath(jobs_dir): "harbor-jobs", str(jobs_dir): "harbor-jobs"}
        if not s.dataset:
            swaps[os.path.abspath(ctx.manifest.resolve(ctx.task.repo))] = ctx.task.repo  # harbor_argv's --path
        outcome.harbor_result = _scrub(outcome.harbor_result, swaps)
    return outcome


def _scrub(obj: Any, swaps: dict[str, str]) -> Any:
    """Replace path prefixes inside every string of a JSON object (longest first)."""
    if isinstance(obj, dict):
        return {k: _scrub(v, swaps) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_scrub(v, swaps) for v in obj]
    if isinstance(obj, str):
        for old in sorted(swaps, key=len, reverse=True):
            if old and old in obj:
                obj = obj.replace(old, swaps[old])
        return obj
    return obj


def ingest_harbor_trial(job_dir: Path, trial_dir: Path, outcome: AgentOutcome) -> None:
    """Copy the single trial of a Harbor job into ``trial_dir`` and read its cost, tokens and reward."""
    trials = sorted(p.parent for p in job_dir.glob("*/result.json")) if job_dir.is_dir() else []
    if len(trials) != 1:
        outcome.warnings.append(f"harbor job {job_dir.name}: expected 1 trial folder with result.json, found {len(trials)}")
        if not trials:
            if outcome.error is None:
                outcome.error = "harbor produced no trial result"
            return
    src = trials[0]
    for name in ("agent", "verifier"):
        if (src / name).is_dir():
            shutil.copytree(src / name, trial_dir / name, dirs_exist_ok=True)
    try:
        result = read_json(src / "result.json", stage="result")
    except InputError as exc:
        outcome.warnings.append(str(exc))
        return
    if not isinstance(result, dict):
        outcome.warnings.append(f"{src.name}/result.json: not a JSON object")
        return
    outcome.harbor_result = result
    outcome.trajectory = (trial_dir / "agent" / "trajectory.json").exists()
    ar = result.get("agent_result") or {}
    if isinstance(ar.get("cost_usd"), (int, float)):
        outcome.cost_usd = float(ar["cost_usd"])
    outcome.n_input_tokens = ar.get("n_input_tokens")
    outcome.n_cache_tokens = ar.get("n_cache_tokens")
    outcome.n_output_tokens = ar.get("n_output_tokens")
    mi = (result.get("agent_info") or {}).get("model_info") or {}
    outcome.model_reported = mi.get("name") or outcome.model_reported
    rewards = (result.get("verifier_result") or {}).get("rewards") or {}
    if isinstance(rewards.get("reward"), (int, float)):
        outcome.reward = float(rewards["reward"])
    exc = result.get("exception_info")
    if exc and outcome.error is None:
        outcome.warnings.append(f"harbor trial exception: {exc.get('exception_type')}: {str(exc.get('exception_message'))[:200]}")


ADAPTER_RUNNERS: dict[str, Callable[[TrialContext], AgentOutcome]] = {
    "claude_code": run_claude_code,
    "command": run_command,
    "harbor": run_harbor,
}


def preflight(manifest: Manifest) -> list[str]:
    """Problems that would make every trial of a condition or task fail, found before spending anything.

    Programs not on PATH, missing MCP config files, local repositories or Harbor task folders that
    do not exist. One line each, naming the condition or task.
    """
    problems = []
    for c in manifest.conditions:
        s = c.settings
        if c.adapter == "claude_code":
            prog = s.claude_bin
            if s.mcp_config and not os.path.isfile(manifest.resolve(s.mcp_config)):
                problems.append(f"condition {c.name}: mcp_config {s.mcp_config}: no such file")
        elif c.adapter == "harbor":
            prog = s.harbor_bin
        else:
            prog = s.command[0] if "{" not in s.command[0] else None
        if prog and shutil.which(prog) is None and not (os.sep in prog and os.access(manifest.resolve(prog), os.X_OK)):
            problems.append(f"condition {c.name}: program not found: {prog} (not on PATH)")
    harbor_dataset = all(c.adapter == "harbor" and c.settings.dataset for c in manifest.conditions)
    for t in manifest.tasks:
        if not is_url(t.repo) and not harbor_dataset and not os.path.isdir(manifest.resolve(t.repo)):
            problems.append(f"task {t.id}: repo {t.repo}: no such folder")
    return problems


def needs_checkout(condition: Any) -> bool:
    """Harbor builds its own environment from the task directory; the others work in a git checkout."""
    return condition.adapter != "harbor"


def import_mcpbr(results_path: str | os.PathLike):
    """Import an mcpbr ``results.json`` as trials: ``(list[Trial], list[IngestError])``.

    Delegates to :func:`analysis_lib.ingest.mcpbr.read_mcpbr_results`.
    """
    return read_mcpbr_results(str(results_path))
