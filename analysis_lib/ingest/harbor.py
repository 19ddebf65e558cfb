"""Harbor files: trial ``result.json`` (TrialResult), job ``result.json``/``config.json``, rewards.

Every field of a TrialResult may be null; field sets grow across Harbor releases, so unknown
keys are ignored. ``verifier_result.rewards`` (the parsed reward) wins over the raw files.
"""

from __future__ import annotations

import os
import re
from typing import Any

from ..core.fileio import read_bytes, read_json
from ..core.times import parse_time
from ..core.trial import InputError
from .identity import canonical_model

MAX_EXCEPTION_CHARS = 500


def is_trial_result(obj: Any) -> bool:
    return isinstance(obj, dict) and ("trial_name" in obj or "verifier_result" in obj or "agent_result" in obj)


def is_job_result(obj: Any) -> bool:
    return isinstance(obj, dict) and ("n_total_trials" in obj or ("stats" in obj and "trial_name" not in obj))


def read_reward_txt(path: str | os.PathLike) -> float:
    """``reward.txt``: a single number (``1``, ``0``, ``0.75``)."""
    text = read_bytes(path, "reward").decode("utf-8", errors="replace").strip()
    if not text:
        raise InputError(str(path), "reward", "empty reward file")
    try:
        return float(text.split()[0])
    except ValueError:
        raise InputError(str(path), "reward", f"reward is not a number: {text[:40]!r}") from None


def reward_from_mapping(rewards: Any) -> float | None:
    """The reward of a flat ``{"reward": x}`` map (or its only value), or a nested ``final_score``."""
    if isinstance(rewards, (int, float)) and not isinstance(rewards, bool):
        return float(rewards)
    if not isinstance(rewards, dict):
        return None
    if isinstance(rewards.get("reward"), (int, float)):
        return float(rewards["reward"])
    numeric = [v for v in rewards.values() if isinstance(v, (int, float)) and not isinstance(v, bool)]
    if len(numeric) == 1:
        return float(numeric[0])
    fs = rewards.get("final_score")
    if isinstance(fs, dict):
        res, tot = fs.get("result"), fs.get("total")
        if isinstance(res, (int, float)) and isinstance(tot, (int, float)) and tot:
            return float(res) / float(tot)
    return None


def read_reward_json(path: str | os.PathLike) -> float | None:
    return reward_from_mapping(read_json(path, "reward"))


def trial_result_fields(obj: dict) -> dict[str, Any]:
    """The parts of a TrialResult the analysis uses, with nulls kept as None."""
    ar = obj.get("agent_result") if isinstance(obj.get("agent_result"), dict) else {}
    vr = obj.get("verifier_result") if isinstance(obj.get("verifier_result"), dict) else None
    ex = obj.get("exception_info") if isinstance(obj.get("exception_info"), dict) else None
    ae = obj.get("agent_execution") if isinstance(obj.get("agent_execution"), dict) else {}
    info = obj.get("agent_info") if isinstance(obj.get("agent_info"), dict) else {}
    model_info = info.get("model_info") if isinstance(info.get("model_info"), dict) else {}
    cfg = obj.get("config") if isinstance(obj.get("config"), dict) else {}
    cfg_agent = cfg.get("agent") if isinstance(cfg.get("agent"), dict) else {}
    exception = None
    if ex:
        msg = str(ex.get("exception_message") or "").strip().splitlines()
        exception = f"{ex.get('exception_type') or 'Exception'}: {msg[0] if msg else ''}"[:MAX_EXCEPTION_CHARS]
    rewards = vr.get("rewards") if vr else None
    bench = obj.get("bench") if isinstance(obj.get("bench"), dict) else {}  # the benchmark runner's own section
    return {
        "task_name": obj.get("task_name"),
        "trial_name": obj.get("trial_name"),
        "reward": reward_from_mapping(rewards),
        "exception": exception,
        "exception_type": ex.get("exception_type") if ex else None,
        "started_at": parse_time(obj.get("started_at")),
        "finished_at": parse_time(obj.get("finished_at")),
        "agent_started_at": parse_time(ae.get("started_at")),
        "agent_finished_at": parse_time(ae.get("finished_at")),
        "n_input_tokens": ar.get("n_input_tokens"),
        "n_cache_tokens": ar.get("n_cache_tokens"),
        "n_output_tokens": ar.get("n_output_tokens"),
        "cost_usd": ar.get("cost_usd"),
        "agent_name": info.get("name") or cfg_agent.get("name"),
        "agent_version": info.get("version"),
        "model_name": cfg_agent.get("model_name") or model_info.get("name"),
        "agent_import_path": cfg_agent.get("import_path"),
        "mcp_servers": cfg_agent.get("mcp_servers"),
        "job_id": cfg.get("job_id"),
        "mcp_exposed": bench.get("mcp_exposed") if isinstance(bench.get("mcp_exposed"), bool) else None,
        "mcp_used": bench.get("mcp_used") if isinstance(bench.get("mcp_used"), bool) else None,
        "cost_estimated": bench.get("cost_source") == "estimate",  # the runner priced a killed trial's tokens
        "dataset": obj.get("source") if isinstance(obj.get("source"), str) else None,
        "config": run_config(obj),
    }


# Keys of a TrialConfig that name one trial, not the configuration its arm shares.
_PER_TRIAL = {"task.path", "task.download_dir", "task.overwrite", "trial_name", "trials_dir", "job_id", "artifacts",
              "simulated"}
# Environment variables whose value must never reach an output (keys, tokens, passwords).
_SECRET = re.compile(r"KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL|AUTH", re.IGNORECASE)
_STAMP = re.compile(r"^\d{4}-\d{2}-\d{2}(?:__|T|_)\d{2}[-:]\d{2}[-:]\d{2}$")


def run_config(obj: dict) -> dict[str, Any]:
    """The configuration a trial shares with the other trials of its arm, as dotted keys: Harbor's
    ``config`` (agent, environment, verifier, timeouts, MCP servers, skills, the dataset of the task)
    without what names the trial itself, plus the agent's version and the job folder's name.

    Environment values whose name looks secret are replaced by ``"<set>"``. Arms of a study file
    select trials by these keys (:mod:`analysis_lib.study.study_file`); the design audit compares them.
    """
    cfg = obj.get("config") if isinstance(obj.get("config"), dict) else {}
    out: dict[str, Any] = {}
    _flatten(cfg, "", out)
    for key in [k for k in out if k in _PER_TRIAL or k.startswith("artifacts.")]:
        del out[key]
    for key in [k for k in out if k.startswith("agent.env.") and _SECRET.search(k[len("agent.env."):])]:
        out[key] = "<set>"
    info = obj.get("agent_info") if isinstance(obj.get("agent_info"), dict) else {}
    if info.get("version") not in (None, "", "unknown"):
        out["agent_info.version"] = info["version"]
    job = job_folder(cfg.get("trials_dir"))
    if job:
        out["job"] = job
    if isinstance(obj.get("source"), str):
        out["source"] = obj["source"]
    return {k: out[k] for k in sorted(out)}


def _flatten(value: Any, prefix: str, out: dict[str, Any]) -> None:
    # Lists (MCP servers, skills) stay whole: their order and content are one setting.
    if isinstance(value, dict) and value:
        for k, v in value.items():
            _flatten(v, f"{prefix}{k}.", out)
    elif prefix and value is not None and value != {} and value != []:
        out[prefix[:-1]] = value


def job_folder(trials_dir: Any) -> str | None:
    """The name a job folder gives its trials: the last part of ``trials_dir`` that is not a timestamp
    (``.../mcp-remote-direct/2026-03-03__19-30-13`` -> ``mcp-remote-direct``), else the timestamp."""
    if not isinstance(trials_dir, str) or not trials_dir.strip():
        return None
    parts = [p for p in trials_dir.replace("\\", "/").rstrip("/").split("/") if p]
    named = [p for p in parts if not _STAMP.match(p)]
    return named[-1] if named else (parts[-1] if parts else None)


def profile_from_agent(agent_name: str | None, model_name: str | None, import_path: str | None = None) -> str:
    """Profile of a trial: ``<agent>@<model's one name>`` (agent from name or import path; see :mod:`.identity`)."""
    agent = agent_name or (import_path.rsplit(":", 1)[-1] if import_path else None) or "agent"
    model = canonical_model(model_name)
    return f"{agent}@{model}" if model else agent
