"""mini-swe-agent trajectories (``<instance_id>.traj.json``) -> ATIF.

The file is ``{info, messages, trajectory_format}`` (``mini-swe-agent-1`` up to v1.x,
``mini-swe-agent-1.1`` from v2.0):

- ``info``: ``exit_status`` (``Submitted``, ``LimitsExceeded``, ...), ``submission`` (the patch),
  ``model_stats{instance_cost, api_calls}``, ``mini_version``, ``config{agent, model{model_name}, ...}``;
- ``messages``: OpenAI chat messages (``content`` a string or a list of ``{type: text, text}`` parts)
  with an ``extra`` field; an assistant message's ``extra.response.usage`` is the call's usage
  (``prompt_tokens`` includes cached tokens, ``prompt_tokens_details.cached_tokens`` or Anthropic's
  ``cache_read_input_tokens`` the cached part).

Mapping: system / user messages -> system / user steps; each assistant message -> one agent step.
Up to v1.x the action is the message's one block matching the agent's ``action_regex``
(``info.config.agent.action_regex``, by default ```` ```bash ````) -> a ``bash`` tool call
``{command}``, whose result is the next user message ``<returncode>N</returncode><output>...``
(``is_error`` when N != 0). mini-swe-agent runs a turn only when its message holds exactly one such
block: a message with none or several is a format error it asks the model to fix, so it becomes an
agent step without a tool call (nothing ran, no file was touched), the feedback its observation. From
v2.0 the commands run are the message's ``extra.actions`` (text models) or its OpenAI ``tool_calls``
and ``tool`` messages (tool-calling models), mapped one to one; a format error is a user message
marked ``extra.interrupt_type: FormatError`` (the refused answer in ``extra.model_response``), again an
agent step without a call. ``instance_cost`` -> ``final_metrics.total_cost_usd``. The file holds no
verdict (SWE-bench grades the submission separately), so the trial has no reward.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

from ..core.fileio import read_json
from ..core.trial import InputError
from .atif import decode_arguments
from .claude_code import content_text

ATIF_VERSION = "ATIF-v1.6"
AGENT_NAME = "mini-swe-agent"
STAGE = "convert"
SOURCE_FORMAT = "mini_swe_agent"

# mini-swe-agent's own default (AgentConfig.action_regex, v1): one ```bash block per turn.
ACTION_REGEX = r"```bash\s*\n(.*?)\n```"
_RETURNCODE = re.compile(r"<returncode>\s*(-?\d+)\s*</returncode>")


def is_mini_swe_agent(doc: Any) -> bool:
    """True for a mini-swe-agent trajectory document."""
    if not isinstance(doc, dict) or not isinstance(doc.get("messages"), list):
        return False
    fmt = doc.get("trajectory_format")
    info = doc.get("info") if isinstance(doc.get("info"), dict) else {}
    return (isinstance(fmt, str) and fmt.startswith("mini-swe-agent")) or "mini_version" in info


def _usage(msg: dict[str, Any]) -> dict[str, Any] | None:
    extra = msg.get("extra") if isinstance(msg.get("extra"), dict) else {}
    resp = extra.get("response") if isinstance(extra.get("response"), dict) else {}
    usage = resp.get("usage") if isinstance(resp.get("usage"), dict) else None
    if usage is None:
        return None
    prompt, completion = usage.get("prompt_tokens"), usage.get("completion_tokens")
    if not isinstance(prompt, int) and not isinstance(completion, int):
        return None
    details = usage.get("prompt_tokens_details") if isinstance(usage.get("prompt_tokens_details"), dict) else {}
    cached = details.get("cached_tokens")
    if not isinstance(cached, int) or not cached:
        cached = usage.get("cache_read_input_tokens") if isinstance(usage.get("cache_read_input_tokens"), int) else 0
    return {"prompt_tokens": prompt or 0, "completion_tokens": completion or 0, "cached_tokens": cached or 0}


def _model_of(msg: dict[str, Any]) -> str | None:
    extra = msg.get("extra") if isinstance(msg.get("extra"), dict) else {}
    resp = extra.get("response") if isinstance(extra.get("response"), dict) else {}
    return resp.get("model") if isinstance(resp.get("model"), str) else None


def _result(call_id: str, text: str) -> dict[str, Any]:
    """A call's observation result, with its exit code when the output gives one (``<returncode>N</returncode>``)."""
    result: dict[str, Any] = {"source_call_id": call_id, "content": text}
    rc = _RETURNCODE.search(text)
    if rc:
        result["extra"] = {"exit_code": int(rc.group(1)), "is_error": int(rc.group(1)) != 0}
    return result


def _action_regex(config: dict[str, Any]) -> re.Pattern[str]:
    """The agent's ``action_regex`` as its configuration records it (v1.x), else mini-swe-agent's default."""
    for part in ("agent", "model"):
        section = config.get(part) if isinstance(config.get(part), dict) else {}
        pattern = section.get("action_regex")
        if isinstance(pattern, str) and 0 < len(pattern) <= 200:
            try:
                return re.compile(pattern, re.DOTALL)
            except re.error:
                break
    return re.compile(ACTION_REGEX, re.DOTALL)


def _commands(text: str, extra: dict[str, Any], action: re.Pattern[str]) -> list[str] | None:
    """The commands a turn ran: v2's ``extra.actions``, else the message's one action block; None for a format
    error (mini-swe-agent runs a turn only when its message holds exactly one block)."""
    actions = extra.get("actions")
    if isinstance(actions, list) and actions:
        return [str(a.get("command")) for a in actions if isinstance(a, dict) and a.get("command") is not None] or None
    found = action.findall(text)
    return [found[0].strip()] if len(found) == 1 and isinstance(found[0], str) else None


def trajectory_to_atif(path: str | os.PathLike) -> dict[str, Any]:
    """Convert one mini-swe-agent ``.traj.json`` to an ATIF trajectory dict (raises :class:`InputError`)."""
    p = Path(path)
    doc = read_json(p, STAGE)
    if not is_mini_swe_agent(doc):
        raise InputError(str(p), STAGE, "not a mini-swe-agent trajectory (no messages list with mini-swe-agent info)")
    info = doc.get("info") if isinstance(doc.get("info"), dict) else {}
    config = info.get("config") if isinstance(info.get("config"), dict) else {}
    model_cfg = config.get("model") if isinstance(config.get("model"), dict) else {}
    model = model_cfg.get("model_name") if isinstance(model_cfg.get("model_name"), str) else None
    action = _action_regex(config)
    steps: list[dict[str, Any]] = []
    pending: dict[str, Any] | None = None  # the agent step whose command (or format error) awaits its feedback
    by_call: dict[str, dict[str, Any]] = {}
    for i, msg in enumerate(doc["messages"]):
        if not isinstance(msg, dict):
            continue
        role, text = msg.get("role"), content_text(msg.get("content"))
        extra = msg.get("extra") if isinstance(msg.get("extra"), dict) else {}
        if role == "assistant":
            step: dict[str, Any] = {"source": "agent", "message": text}
            used_model = _model_of(msg) or model
            if used_model:
                step["model_name"] = used_model
            usage = _usage(msg)
            if usage is not None:
                step["metrics"] = usage
            calls = []
            for tc in msg.get("tool_calls") or []:
                if isinstance(tc, dict) and isinstance(tc.get("function"), dict):
                    cid = str(tc.get("id") or f"call-{i}-{len(calls)}")
                    calls.append({"tool_call_id": cid, "function_name": str(tc["function"].get("name") or "unknown"),
                                  "arguments": decode_arguments(tc["function"].get("arguments"))})
                    by_call[cid] = step
            if not calls:
                commands = _commands(text, extra, action)
                if commands is None:
                    # Refused by mini-swe-agent (none or several actions): the model is asked again, nothing ran.
                    step["extra"] = {"format_error": True, "actions_found": len(action.findall(text))}
                else:
                    calls = [{"tool_call_id": f"call-{i}" + (f"-{k}" if k else ""), "function_name": "bash",
                              "arguments": {"command": c}} for k, c in enumerate(commands)]
            if calls:
                step["tool_calls"] = calls
            steps.append(step)
            pending = step if not msg.get("tool_calls") else None
        elif role == "tool" and by_call.get(str(msg.get("tool_call_id"))) is not None:
            target = by_call[str(msg.get("tool_call_id"))]
            target.setdefault("observation", {"results": []})["results"].append(_result(str(msg.get("tool_call_id")), text))
        elif role == "user" and extra.get("interrupt_type") == "FormatError":
            # v2: the refused answer is not a message of its own, only the feedback's extra.
            step = {"source": "agent", "message": content_text(extra.get("model_response")),
                    "extra": {"format_error": True, "actions_found": extra.get("n_actions")},
                    "observation": {"results": [{"content": text}]}}
            if model:
                step["model_name"] = model
            steps.append(step)
            pending = None
        elif role == "user" and pending is not None:
            calls = pending.get("tool_calls")
            # A command's output, or the format error feedback (an observation without a call).
            pending["observation"] = {"results": [_result(calls[0]["tool_call_id"], text) if calls else {"content": text}]}
            pending = None
        else:
            steps.append({"source": "system" if role == "system" else "user", "message": text})
            pending = None
    if not steps:
        raise InputError(str(p), STAGE, "mini-swe-agent trajectory without messages")
    for n, step in enumerate(steps, start=1):
        step["step_id"] = n
    stats = info.get("model_stats") if isinstance(info.get("model_stats"), dict) else {}
    final: dict[str, Any] = {"total_steps": len(steps)}
    if isinstance(stats.get("instance_cost"), (int, float)) and not isinstance(stats.get("instance_cost"), bool):
        final["total_cost_usd"] = float(stats["instance_cost"])
    return agent_log_document(p, AGENT_NAME, info.get("mini_version"), model, info, stats, steps, final,
                              {"name": __name__, "source_format": SOURCE_FORMAT,
                               "trajectory_format": doc.get("trajectory_format")})


def agent_log_document(p: Path, agent_name: str, version: Any, model: str | None, info: dict, stats: dict,
                       steps: list[dict], final: dict, converter: dict) -> dict:
    """The ATIF document of a SWE-agent-family log (mini-swe-agent, SWE-agent): agent, steps, totals, converter."""
    agent: dict[str, Any] = {"name": agent_name, "version": str(version or "unknown")}
    if model:
        agent["model_name"] = model
    agent["extra"] = {k: info[k] for k in ("exit_status",) if k in info}
    if isinstance(stats.get("api_calls"), int):
        agent["extra"]["api_calls"] = stats["api_calls"]
    return {"schema_version": ATIF_VERSION, "session_id": p.name.split(".traj")[0], "agent": agent, "steps": steps,
            "final_metrics": final, "extra": {"converter": converter}}
