"""A study's own per-trial metrics beside Harbor's ``result.json``: CodeScaleBench's ``task_metrics.json``.

The study counted them from Claude Code's raw transcript, one count per API call, where Harbor's
``agent_result`` sums its ATIF conversion, which repeats one call's usage on every content block
(2.1-3.5x the input tokens on the CodeScaleBench slice, by a different factor per arm). They are a
token source of their own (:mod:`analysis_lib.metrics.tokens`) and carry the tool calls of trials whose
trajectory was not kept. Fields (every one may be null)::

    input_tokens            Anthropic sense: prompt tokens outside the cache
    cache_read_tokens       cached prompt tokens read
    cache_creation_tokens   prompt tokens written to the cache
    output_tokens, cost_usd, reward, status (passed | failed), config_name
    tool_calls_total, tool_calls_mcp, tool_calls_by_name {name: calls}, mcp_servers [names]
    files_modified          distinct files written by Edit or Write calls (null when there was none)
    instruction_length_chars  characters of the instruction the agent was given
"""

from __future__ import annotations

import os
from typing import Any

from ..core.fileio import read_json
from ..core.trial import InputError

FILE_NAME = "task_metrics.json"


def _int(v: Any) -> int | None:
    return int(v) if isinstance(v, (int, float)) and not isinstance(v, bool) and v >= 0 else None


def is_task_metrics(obj: Any) -> bool:
    """A CodeScaleBench per-trial metrics object (tokens in Anthropic's split and tool-call counts)."""
    return isinstance(obj, dict) and "cache_read_tokens" in obj and "tool_calls_total" in obj


def read_task_metrics(path: str | os.PathLike) -> dict[str, Any]:
    """The tokens (in ATIF's sense: ``input`` includes cached and cache-written tokens), cost, tool
    calls and the study's own verdict of one trial. Raises :class:`InputError` naming the file."""
    obj = read_json(path, "task_metrics")
    if not is_task_metrics(obj):
        raise InputError(str(path), "task_metrics", "not a per-trial metrics file (no cache_read_tokens, tool_calls_total)")
    fresh, read, written = _int(obj.get("input_tokens")), _int(obj.get("cache_read_tokens")), _int(obj.get("cache_creation_tokens"))
    parts = [v for v in (fresh, read, written) if v is not None]
    by_name = obj.get("tool_calls_by_name")
    servers = obj.get("mcp_servers")
    return {
        "input": sum(parts) if parts else None,
        "output": _int(obj.get("output_tokens")),
        "cached": read,
        "cache_write": written,
        "cost": float(obj["cost_usd"]) if isinstance(obj.get("cost_usd"), (int, float)) else None,
        "tool_calls": _int(obj.get("tool_calls_total")),
        "mcp_calls": _int(obj.get("tool_calls_mcp")),
        "tool_distribution": {str(k): int(v) for k, v in by_name.items() if _int(v) is not None}
        if isinstance(by_name, dict) else None,
        "mcp_servers": [str(s) for s in servers] if isinstance(servers, list) else None,
        "status": obj.get("status") if isinstance(obj.get("status"), str) else None,
        "reward": float(obj["reward"]) if isinstance(obj.get("reward"), (int, float)) else None,
        "config_name": obj.get("config_name") if isinstance(obj.get("config_name"), str) else None,
        "files_modified": _int(obj.get("files_modified")),
        "instruction_chars": _int(obj.get("instruction_length_chars")),
    }
