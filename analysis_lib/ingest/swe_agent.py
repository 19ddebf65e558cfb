"""SWE-agent trajectories (``<instance_id>/<instance_id>.traj``) -> ATIF.

A ``.traj`` file is JSON ``{environment, trajectory, history, info, replay_config}``:

- ``trajectory``: one entry per turn, ``{response, thought, action, observation, execution_time,
  state, query | messages}``; ``action`` is the command text (``open x.py``, ``edit 3:5 ... end_of_edit``,
  ``str_replace_editor view /testbed/x.py``, a shell command, ``submit``);
- ``history``: the chat messages; from SWE-agent 1.0 with function calling an assistant message
  carries OpenAI ``tool_calls`` (then the call's name and arguments are taken from there);
- ``info``: ``exit_status``, ``submission`` (the patch), ``model_stats{instance_cost, tokens_sent,
  tokens_received, api_calls}``, ``swe_agent_version``; ``replay_config``: the run's configuration
  as a JSON string (``agent.model.name``).

Mapping: every turn -> one agent step with one tool call and its observation. The call is named
by the command's first word when SWE-agent defines it (``open``/``goto``/``scroll_*`` -> read,
``create``/``edit`` -> edit, the file being the one ``state.open_file`` names, ``find_file``/
``search_dir``/``search_file`` -> search, ``str_replace_editor`` with its ``command``), else it is a
``bash`` call ``{command}``. Usage exists only as run totals:
``tokens_sent`` / ``tokens_received`` / ``instance_cost`` -> ``final_metrics`` (no cached split); zero
tokens sent and received (a replay records none) leave the counts unknown, and a zero cost is no cost.
The file holds no verdict, so the trial has no reward.
"""

from __future__ import annotations

import os
import shlex
from pathlib import Path
from typing import Any

import orjson

from ..core.fileio import read_json
from ..core.trial import InputError
from .atif import decode_arguments
from .claude_code import content_text
from .mini_swe_agent import agent_log_document

AGENT_NAME = "swe-agent"
STAGE = "convert"
SOURCE_FORMAT = "swe_agent"
# SWE-agent's own commands whose first argument is a path.
_PATH_COMMANDS = {"open", "create", "find_file", "search_file"}
_COMMANDS = _PATH_COMMANDS | {"edit", "goto", "scroll_up", "scroll_down", "search_dir", "submit", "insert", "filemap"}


def is_swe_agent(doc: Any) -> bool:
    """True for a SWE-agent trajectory document."""
    if not isinstance(doc, dict) or not isinstance(doc.get("trajectory"), list):
        return False
    first = next((t for t in doc["trajectory"] if isinstance(t, dict)), None)
    has_turns = first is None or ("action" in first and ("observation" in first or "response" in first))
    return has_turns and (isinstance(doc.get("history"), list) or isinstance(doc.get("info"), dict))


def _call(action: str, tool_call: dict[str, Any] | None, cid: str, open_file: str | None = None) -> dict[str, Any]:
    """The tool call of one turn: the history's function call when there is one, else parsed from the action text."""
    if tool_call is not None and isinstance(tool_call.get("function"), dict):
        fn = tool_call["function"]
        return {"tool_call_id": str(tool_call.get("id") or cid), "function_name": str(fn.get("name") or "unknown"),
                "arguments": decode_arguments(fn.get("arguments"))}
    text = action.strip()
    first_line = text.split("\n", 1)[0]
    try:
        words = shlex.split(first_line)
    except ValueError:
        words = first_line.split()
    head = words[0] if words else ""
    if head == "str_replace_editor" and len(words) >= 3:
        return {"tool_call_id": cid, "function_name": head, "arguments": {"command": words[1], "path": words[2]}}
    if head in _PATH_COMMANDS and len(words) >= 2:
        return {
            "tool_call_id": cid,
            "function_name": head,
            "arguments": {"path": words[-1] if head != "find_file" else words[1], "command": text},
        }
    if head in ("edit", "insert") and open_file:
        # SWE-agent edits the file it has open (the state after the previous turn says which).
        return {"tool_call_id": cid, "function_name": head, "arguments": {"path": open_file, "command": text}}
    if head in _COMMANDS:
        return {"tool_call_id": cid, "function_name": head, "arguments": {"command": text}}
    return {"tool_call_id": cid, "function_name": "bash", "arguments": {"command": text}}


def _open_file(state: Any) -> str | None:
    """The file open after a turn, from its ``state`` (a JSON string or object; ``n/a`` when none)."""
    if isinstance(state, str):
        try:
            state = orjson.loads(state)
        except orjson.JSONDecodeError:
            return None
    f = state.get("open_file") if isinstance(state, dict) else None
    return f if isinstance(f, str) and f and f not in ("n/a", "None") else None


def _model(doc: dict[str, Any]) -> str | None:
    cfg = doc.get("replay_config")
    if isinstance(cfg, str):
        try:
            cfg = orjson.loads(cfg)
        except orjson.JSONDecodeError:
            cfg = None
    agent = cfg.get("agent") if isinstance(cfg, dict) and isinstance(cfg.get("agent"), dict) else {}
    model = agent.get("model") if isinstance(agent.get("model"), dict) else {}
    name = model.get("name") or model.get("model_name")
    return name if isinstance(name, str) and name else None


def trajectory_to_atif(path: str | os.PathLike) -> dict[str, Any]:
    """Convert one SWE-agent ``.traj`` to an ATIF trajectory dict (raises :class:`InputError`)."""
    p = Path(path)
    doc = read_json(p, STAGE)
    if not is_swe_agent(doc):
        raise InputError(str(p), STAGE, "not a SWE-agent trajectory (no trajectory list of action/observation turns)")
    model = _model(doc)
    history = [m for m in doc.get("history") or [] if isinstance(m, dict)]
    steps: list[dict[str, Any]] = []
    for m in history:
        if m.get("role") in ("system", "user") and not m.get("is_demo"):
            steps.append({"source": m["role"], "message": content_text(m.get("content"))})
            if m["role"] == "user":
                break  # the task; later user messages are observations, kept with their turn
    tool_calls = [tc for m in history if m.get("role") == "assistant" for tc in (m.get("tool_calls") or []) if isinstance(tc, dict)]
    open_file: str | None = None
    for i, turn in enumerate(t for t in doc["trajectory"] if isinstance(t, dict)):
        action = turn.get("action") if isinstance(turn.get("action"), str) else ""
        step: dict[str, Any] = {"source": "agent", "message": content_text(turn.get("thought") or turn.get("response"))}
        if model:
            step["model_name"] = model
        if action.strip():
            call = _call(action, tool_calls[i] if i < len(tool_calls) else None, f"turn-{i + 1}", open_file)
            step["tool_calls"] = [call]
            step["observation"] = {"results": [{"source_call_id": call["tool_call_id"], "content": content_text(turn.get("observation"))}]}
        open_file = _open_file(turn.get("state")) or open_file
        if isinstance(turn.get("execution_time"), (int, float)):
            step["extra"] = {"execution_time": turn["execution_time"]}
        steps.append(step)
    if not steps:
        raise InputError(str(p), STAGE, "SWE-agent trajectory without turns")
    for n, step in enumerate(steps, start=1):
        step["step_id"] = n
    info = doc.get("info") if isinstance(doc.get("info"), dict) else {}
    stats = info.get("model_stats") if isinstance(info.get("model_stats"), dict) else {}
    final: dict[str, Any] = {"total_steps": len(steps)}
    counts = {src: stats[src] for src in ("tokens_sent", "tokens_received")
              if isinstance(stats.get(src), int) and not isinstance(stats.get(src), bool)}
    # Turns run on zero tokens sent and received: nothing was counted (a replay, or a model that reports no
    # usage), so the counts are unknown, not 0.
    if any(counts.values()):
        for src, dst in (("tokens_sent", "total_prompt_tokens"), ("tokens_received", "total_completion_tokens")):
            if src in counts:
                final[dst] = counts[src]
    if (
        isinstance(stats.get("instance_cost"), (int, float))
        and not isinstance(stats.get("instance_cost"), bool)
        and stats["instance_cost"] > 0
    ):
        final["total_cost_usd"] = float(stats["instance_cost"])
    return agent_log_document(
        p, AGENT_NAME, info.get("swe_agent_version"), model, info, stats, steps, final, {"name": __name__, "source_format": SOURCE_FORMAT}
    )
