"""Harbor files: trial ``result.json`` (TrialResult), job ``result.json``/``config.json``, rewards.

Every field of a TrialResult may be null; field sets grow across Harbor releases, so unknown
keys are ignored. ``verifier_result.rewards`` (the parsed reward) wins over the raw files.
"""

from __future__ import annotations

import os
from datetime import datetime
from typing import Any

from ..fileio import read_bytes, read_json
from ..trial import InputError
from .identity import canonical_model

MAX_EXCEPTION_CHARS = 500


def parse_time(v: Any) -> datetime | None:
    """ISO 8601 text to datetime (``Z`` accepted); naive values are kept naive (local time in Harbor)."""
    if not isinstance(v, str) or not v:
        return None
    try:
        return datetime.fromisoformat(v.replace("Z", "+00:00") if v.endswith("Z") else v)
    except ValueError:
        return None


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
    }


def profile_from_agent(agent_name: str | None, model_name: str | None, import_path: str | None = None) -> str:
    """Profile of a trial: ``<agent>@<model's one name>`` (agent from name or import path; see :mod:`.identity`)."""
    agent = agent_name or (import_path.rsplit(":", 1)[-1] if import_path else None) or "agent"
    model = canonical_model(model_name)
    return f"{agent}@{model}" if model else agent
