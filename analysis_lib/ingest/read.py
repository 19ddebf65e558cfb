"""Read one discovered source into trials; every problem becomes an IngestError, never a crash."""

from __future__ import annotations

import os
import re

from ..core.fileio import read_json
from ..core.trial import IngestError, InputError, Timing, Trial
from . import mini_swe_agent, swe_agent
from .atif import parse_trajectory, read_trajectory
from .claude_code import stream_json_to_atif
from .convert import convert_file
from .ctrf import read_ctrf
from .discover import TrialSource
from .harbor import profile_from_agent, read_reward_json, read_reward_txt, trial_result_fields
from .identity import split_task_id
from .inspect_log import read_inspect_log
from .mcpbr import read_mcpbr_results
from .results_table import read_results_csv, read_skillsbench_registry
from .task_metrics import FILE_NAME as TASK_METRICS
from .task_metrics import read_task_metrics
from .tb1 import read_tb1_run


def read_source(src: TrialSource) -> tuple[list[Trial], list[IngestError]]:
    """Trials of one source and the errors met reading it (a bad file never raises out)."""
    trials, errors = _read(src)
    for t in trials:
        task, prefix = split_task_id(t.task_id)
        if prefix is not None:
            # One task id whatever dataset or organisation prefixed it; the prefix stays in a column.
            t.task_id = task
            t.metadata["task_dataset"] = prefix
    return trials, errors


def _read(src: TrialSource) -> tuple[list[Trial], list[IngestError]]:
    try:
        if src.kind == "trial_dir":
            return read_trial_dir(src)
        if src.kind == "atif_file":
            return _read_atif_file(src)
        if src.kind == "transcript":
            return _read_transcript(src)
        if src.kind in ("tb1_run", "inspect_log", "mcpbr"):
            return _read_legacy(src)
        if src.kind in ("mini_swe_agent", "swe_agent"):
            return _read_agent_trajectory(src)
        if src.kind == "results_csv":
            return read_results_csv(src.path)
        if src.kind == "skillsbench_registry":
            return read_skillsbench_registry(src.path)
        return [], [IngestError(src.path, "discover", f"unknown source kind {src.kind!r}")]
    except InputError as exc:
        return [], [exc.error]
    except RecursionError:
        return [], [IngestError(src.path, "read", "JSON nested too deeply")]
    except Exception as exc:  # a reader bug must not stop the other trials
        return [], [IngestError(src.path, "read", f"unexpected {type(exc).__name__}: {str(exc)[:200]}")]


def _read_legacy(src: TrialSource) -> tuple[list[Trial], list[IngestError]]:
    reader = {"tb1_run": read_tb1_run, "inspect_log": read_inspect_log}.get(src.kind, read_mcpbr_results)
    return reader(src.path)


def _read_transcript(src: TrialSource) -> tuple[list[Trial], list[IngestError]]:
    doc = convert_file(src.path, subagents=src.meta.get("subagents"))
    traj = parse_trajectory(doc, src.path)
    task = os.path.splitext(os.path.basename(src.path))[0]
    trials, errors = _file_trial(src, traj, task, "transcript", default_profile="claude-code")
    # What the conversion lost (a cut last line, replaced bytes) is said once per file.
    conv = (doc.get("extra") or {}).get("converter") or {}
    errors += [IngestError(src.path, "convert", w, "warning") for w in conv.get("warnings") or [] if isinstance(w, str)]
    return trials, errors


def _read_agent_trajectory(src: TrialSource) -> tuple[list[Trial], list[IngestError]]:
    """A mini-swe-agent ``.traj.json`` or SWE-agent ``.traj``: converted to ATIF, task = the instance id."""
    to_atif = mini_swe_agent.trajectory_to_atif if src.kind == "mini_swe_agent" else swe_agent.trajectory_to_atif
    doc = to_atif(src.path)
    traj = parse_trajectory(doc, src.path)
    name = os.path.basename(src.path)
    task = name.split(".traj")[0] if ".traj" in name else name.rsplit(".json", 1)[0]
    trials, errors = _file_trial(src, traj, task, src.source_format, default_profile=doc["agent"]["name"])
    exit_status = (doc["agent"].get("extra") or {}).get("exit_status")
    if exit_status is not None:
        trials[0].metadata["exit_status"] = exit_status
    return trials, errors


def _read_atif_file(src: TrialSource) -> tuple[list[Trial], list[IngestError]]:
    traj = read_trajectory(src.path)
    task = os.path.basename(src.path).split(".trajectory")[0].split(".json")[0]
    return _file_trial(src, traj, task, "atif", default_profile="agent")


def _file_trial(src: TrialSource, traj, task: str, fmt: str, *, default_profile: str) -> tuple[list[Trial], list[IngestError]]:
    """One trial from a lone trajectory file: profile = ``<agent>@<model>``, task = the file's stem."""
    trial = Trial(
        profile=profile_from_agent(traj.agent_name or default_profile, traj.model_name),
        task_id=task,
        repetition=0,  # numbered after reading, by start time
        run_id=src.run_id,
        trial_path=src.path,
        source_format=fmt,
        trajectory=traj,
        paths={"transcript" if fmt in ("transcript", "mini_swe_agent", "swe_agent") else "trajectory": src.path},
        metadata={"agent_name": traj.agent_name, "model_name": traj.model_name},
    )
    return [trial], [IngestError(src.path, "trajectory", w, "warning") for w in traj.warnings]


def read_trial_dir(src: TrialSource) -> tuple[list[Trial], list[IngestError]]:
    """A run-layout or Harbor trial folder: result.json, trajectory, CTRF, reward, CodeCanvas.

    The files read are those :data:`.fingerprint.TRIAL_ENTRIES` lists (the cache of the trials
    table watches them).
    """
    d = src.path

    def isfile(rel: str) -> bool:
        return os.path.isfile(os.path.join(d, rel))

    def isdir(rel: str) -> bool:
        return os.path.isdir(os.path.join(d, rel))

    errors: list[IngestError] = []
    paths: dict[str, str] = {}
    res: dict = {}
    rp = os.path.join(d, "result.json")
    if isfile("result.json"):
        paths["result"] = rp
        try:
            obj = read_json(rp, "result")
            if isinstance(obj, dict):
                res = trial_result_fields(obj)
            else:
                errors.append(IngestError(rp, "result", "result.json is not a JSON object"))
        except InputError as exc:
            errors.append(exc.error)

    trajectory = None
    traj_agent = traj_model = None
    tp = os.path.join(d, "agent", "trajectory.json")
    if isfile("agent/trajectory.json"):
        paths["trajectory"] = tp
        try:
            trajectory = read_trajectory(tp)
            traj_agent, traj_model = trajectory.agent_name, trajectory.model_name
            errors.extend(IngestError(tp, "trajectory", w, "warning") for w in trajectory.warnings)
        except InputError as exc:
            errors.append(exc.error)
    elif isfile("agent/claude-code.txt"):
        sp = os.path.join(d, "agent", "claude-code.txt")
        paths["trajectory"] = sp
        try:
            trajectory = parse_trajectory(stream_json_to_atif(sp), sp)
            traj_agent, traj_model = trajectory.agent_name, trajectory.model_name
        except InputError as exc:
            errors.append(exc.error)

    tests = None
    cp = os.path.join(d, "verifier", "ctrf.json")
    if isfile("verifier/ctrf.json"):
        paths["ctrf"] = cp
        try:
            tests = read_ctrf(cp)
        except InputError as exc:
            errors.append(exc.error)

    reward = res.get("reward")
    for name, reader in (("reward.txt", read_reward_txt), ("reward.json", read_reward_json)):
        p = os.path.join(d, "verifier", name)
        if isfile("verifier/" + name):
            paths["reward"] = p
            if reward is None:
                try:
                    reward = reader(p)
                except InputError as exc:
                    errors.append(exc.error)
            break

    if isdir("agent/sessions/codecanvas"):
        paths["codecanvas"] = os.path.join(d, "agent", "sessions", "codecanvas")

    study_metrics = None
    if isfile(TASK_METRICS):
        paths["task_metrics"] = os.path.join(d, TASK_METRICS)
        try:
            study_metrics = read_task_metrics(paths["task_metrics"])
        except InputError as exc:
            errors.append(exc.error)

    if not paths:
        errors.append(IngestError(d, "discover", "trial folder holds no result.json, trajectory, CTRF or reward"))
        return [], errors

    task_id = src.task_id or res.get("task_name") or os.path.basename(d).split("__")[0]
    agent_name = res.get("agent_name") or traj_agent
    model_name = res.get("model_name") or traj_model
    profile = src.profile or profile_from_agent(agent_name, model_name, res.get("agent_import_path"))
    trial = Trial(
        profile=profile,
        task_id=str(task_id),
        repetition=src.repetition or 0,  # 0: numbered after reading (Harbor: by start time)
        run_id=src.run_id,
        trial_path=d,
        source_format=src.source_format,
        trajectory=trajectory,
        tests=tests,
        reward=reward,
        timing=Timing(
            started_at=res.get("started_at"),
            finished_at=res.get("finished_at"),
            agent_started_at=res.get("agent_started_at"),
            agent_finished_at=res.get("agent_finished_at"),
        ),
        exception=res.get("exception"),
        paths=paths,
        metadata={
            "agent_name": agent_name,
            "model_name": model_name,
            "agent_version": res.get("agent_version"),
            "harbor_tokens": {k: res.get(k) for k in ("n_input_tokens", "n_cache_tokens", "n_output_tokens", "cost_usd", "cost_estimated")},
            "exception_type": res.get("exception_type"),
            "trial_name": res.get("trial_name"),
            "task_name": res.get("task_name"),
            "config": res.get("config") or {},
            "dataset": res.get("dataset"),
            "study_metrics": study_metrics,
            "never_reached_model": never_reached_model(trajectory),
            "instruction_chars": instruction_chars(trajectory, study_metrics),
            "agent_timeout_sec": agent_timeout(res),
        },
        # What the benchmark runner measured of a treatment trial (result.json "bench"), carried as the metrics' values.
        carried_metrics={k: res[k] for k in ("mcp_exposed", "mcp_used") if res.get(k) is not None},
    )
    if trajectory is None and study_metrics is not None:
        trial.carried_metrics.update(_carried_calls(study_metrics))
    return [trial], errors


def _carried_calls(study: dict) -> dict:
    """Tool-call and process counts a study recorded for a trial whose trajectory was not kept, by metric id."""
    dist = study.get("tool_distribution")
    out = {"tool_calls_count": study.get("tool_calls"), "mcp_tool_calls": study.get("mcp_calls"),
           "files_edited": study.get("files_modified")}
    if dist is not None:
        out["tool_distribution"] = dist
        out["mcp_tools_used"] = sum(1 for name in dist if name.startswith("mcp__"))
    return {k: v for k, v in out.items() if v is not None}


def instruction_chars(traj, study: dict | None) -> int | None:
    """Characters of the instruction the agent was given: the trajectory's first user message, else what the
    study's own metrics record (CodeScaleBench ``instruction_length_chars``); None when neither keeps it."""
    if traj is not None:
        first = next((s for s in traj.steps if s.source == "user" and not s.is_copied_context), None)
        if first is not None and first.message:
            return len(first.message)
    return study.get("instruction_chars") if study else None


_TIMED_OUT = re.compile(r"timed out after (\d+(?:\.\d+)?) ?s(?:ec(?:ond)?s?)?\b", re.IGNORECASE)


def agent_timeout(res: dict) -> float | None:
    """The agent's time limit in seconds, as far as the trial says: the configured override, else the limit a
    timeout reports (Harbor's ``AgentTimeoutError: Agent execution timed out after 3600.0 seconds``); None when
    neither says (a task's own limit is written nowhere else)."""
    config = res.get("config") or {}
    for key in ("agent.override_timeout_sec", "agent.max_timeout_sec"):
        if isinstance(config.get(key), (int, float)) and not isinstance(config.get(key), bool):
            return float(config[key])
    m = _TIMED_OUT.search(res.get("exception") or "")
    return float(m.group(1)) if m else None


# What an agent CLI writes in place of a model's answer when no model call was made.
_NO_MODEL = "<synthetic>"


def never_reached_model(traj) -> str | None:
    """Why a trajectory shows that the agent never got an answer from a model, else None.

    Claude Code answers a rate limit, an exhausted quota or a failed login itself, as model
    ``<synthetic>`` with zero tokens ("You've hit your limit", "Not logged in"): such a trial is no
    attempt of the agent at the task, whatever the verifier then scored.
    """
    if traj is None:
        return None
    agent_steps = [s for s in traj.steps if s.source == "agent" and not s.is_copied_context]
    if not agent_steps or any((s.prompt_tokens or 0) + (s.completion_tokens or 0) > 0 for s in agent_steps):
        return None
    models = {s.model_name or traj.model_name for s in agent_steps}
    if models != {_NO_MODEL}:
        return None
    said = next((s.message.strip().splitlines()[0] for s in agent_steps if s.message and s.message.strip()), "")
    return f"the agent never reached the model{': ' + said[:120] if said else ''}"
