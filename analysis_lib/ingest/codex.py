"""Codex CLI rollouts (``~/.codex/sessions/.../rollout-*.jsonl``) -> ATIF.

A rollout line is ``{timestamp, type, payload}`` with ``type`` one of ``session_meta``,
``turn_context``, ``response_item``, ``event_msg`` (and ``compacted``); older rollouts wrote the
response items bare. Mapping (FORMATS.md §7):

- one ATIF agent step per model call: the ``reasoning`` / assistant ``message`` /
  ``function_call`` items up to the ``token_count`` event that closes the call;
- ``token_count`` events carry the call's ``last_token_usage`` (step metrics) and the session's
  CUMULATIVE ``total_token_usage``; Codex repeats an event without a new call (same total), so
  an event whose total did not change is ignored. A session continued with ``codex exec resume``
  (a new ``session_meta``) or a counter that restarts (a total below the previous one, or equal to
  the call's own usage) opens a new segment: ``final_metrics`` are the sum of every segment's last
  total, not the last total alone;
- OpenAI semantics already match ATIF: ``input_tokens`` includes ``cached_input_tokens``;
  ``output_tokens`` includes ``reasoning_output_tokens`` (kept in ``metrics.extra``);
- ``function_call`` / ``custom_tool_call`` / ``local_shell_call`` -> tool calls, their
  ``*_output`` items -> observation results (``extra.is_error`` from a non-zero exit code or
  ``success: false``); user messages -> user steps, developer/system messages -> system steps.
Rollouts carry no cost, so ``cost_usd`` is left out.
"""

from __future__ import annotations

import os
from collections import Counter
from pathlib import Path
from typing import Any

import orjson

from ..core.trial import InputError
from .atif import decode_arguments
from .claude_code import content_text
from .jsonl_lines import read_jsonl_objects

ATIF_VERSION = "ATIF-v1.6"
AGENT_NAME = "codex"
CONVERTER = "analysis_lib.ingest.codex"
STAGE = "convert"
ENVELOPE_TYPES = ("session_meta", "turn_context", "response_item", "event_msg", "compacted")
RESPONSE_ITEM_TYPES = (
    "message", "reasoning", "function_call", "function_call_output", "custom_tool_call",
    "custom_tool_call_output", "local_shell_call", "web_search_call",
)

_CONTEXT_TAGS = ("<environment_context>", "<user_instructions>", "# AGENTS.md instructions")


def _int(v: Any) -> int:
    return int(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else 0


def usage_to_atif(usage: dict[str, Any]) -> dict[str, int]:
    """Codex/OpenAI usage -> ATIF counts (input already includes cached input)."""
    return {
        "prompt_tokens": _int(usage.get("input_tokens")),
        "completion_tokens": _int(usage.get("output_tokens")),
        "cached_tokens": _int(usage.get("cached_input_tokens")),
    }


def _output_result(output: Any) -> tuple[str, dict[str, Any]]:
    """Text and ``extra`` of a tool output: a string, a JSON ``{output, metadata}`` string or a dict."""
    extra: dict[str, Any] = {}
    doc = output
    if isinstance(output, str) and output.lstrip().startswith("{"):
        try:
            doc = orjson.loads(output)
        except orjson.JSONDecodeError:
            doc = output
    if isinstance(doc, dict):
        meta = doc.get("metadata") if isinstance(doc.get("metadata"), dict) else {}
        code = meta.get("exit_code", doc.get("exit_code"))
        if isinstance(code, int) and not isinstance(code, bool):
            extra["exit_code"] = code
            extra["is_error"] = code != 0
        if isinstance(doc.get("success"), bool):
            extra["is_error"] = not doc["success"]
        text = doc.get("output", doc.get("content"))
        text = content_text(text) if text is not None else (output if isinstance(output, str) else orjson.dumps(doc).decode())
        return text, extra
    return content_text(output), extra


def _restarted(previous: dict[str, Any], total: dict[str, Any], last: Any) -> bool:
    """True when a cumulative total started again: it fell below the previous one, or it equals this
    call's own usage although an earlier call was already counted."""
    keys = ("input_tokens", "output_tokens", "cached_input_tokens", "total_tokens")
    if any(_int(total.get(k)) < _int(previous.get(k)) for k in keys if k in total and k in previous):
        return True
    return (isinstance(last, dict) and any(_int(previous.get(k)) for k in keys)
            and all(_int(total.get(k)) == _int(last.get(k)) for k in keys if k in total or k in last))


def _continues(previous: dict[str, Any], total: dict[str, Any], last: Any) -> bool:
    """True when ``total`` is ``previous`` plus this call's usage (a counter carried over a resume)."""
    keys = ("input_tokens", "output_tokens")
    return isinstance(last, dict) and all(_int(total.get(k)) == _int(previous.get(k)) + _int(last.get(k)) for k in keys)


def rollout_to_atif(path: str | os.PathLike) -> dict[str, Any]:
    """Convert one Codex CLI rollout JSONL to an ATIF trajectory dict.

    Raises :class:`InputError` naming the file when it is unreadable, empty or holds no rollout line.
    """
    p = Path(path)
    lines, stats = read_jsonl_objects(p, STAGE)
    steps: list[dict[str, Any]] = []
    tool_steps: dict[str, dict[str, Any]] = {}
    counts: Counter = Counter()
    meta: dict[str, Any] = {}
    models: list[str] = []
    open_step: dict[str, Any] | None = None
    last_total: dict[str, Any] | None = None
    # Totals of the segments closed by a resume or a counter reset (summed into final_metrics).
    closed: Counter = Counter()
    segments = 1
    resumed = False
    recognised = 0

    def new_agent_step(ts: Any) -> dict[str, Any]:
        step: dict[str, Any] = {"source": "agent", "message": "", "_text": [], "_reasoning": []}
        if isinstance(ts, str):
            step["timestamp"] = ts
        if models:
            step["model_name"] = models[-1]
        steps.append(step)
        return step

    for lineno, line in lines:
        kind, payload, ts = line.get("type"), line.get("payload"), line.get("timestamp")
        if kind not in ENVELOPE_TYPES and kind in RESPONSE_ITEM_TYPES:
            kind, payload = "response_item", line  # older rollouts: bare response items
        elif kind is None and "id" in line and ("instructions" in line or "timestamp" in line) and lineno == lines[0][0]:
            kind, payload = "session_meta", line  # older rollouts: bare session header
        if not isinstance(payload, dict):
            counts[f"skipped_type:{kind if isinstance(kind, str) else 'none'}"] += 1
            continue
        recognised += 1
        if kind == "session_meta":
            resumed = resumed or last_total is not None  # a resumed session appends its own header
            meta.update(
                {k: v for k, v in payload.items() if k in ("id", "cwd", "originator", "cli_version", "source", "model_provider", "git")}
            )
        elif kind == "turn_context":
            if isinstance(payload.get("model"), str) and (not models or models[-1] != payload["model"]):
                models.append(payload["model"])
        elif kind == "event_msg":
            if payload.get("type") != "token_count":
                counts[f"skipped_event:{payload.get('type')}"] += 1
                continue
            info = payload.get("info")
            if not isinstance(info, dict):
                counts["token_count_without_info"] += 1
                continue
            total = info.get("total_token_usage")
            if isinstance(info.get("model"), str) and (not models or models[-1] != info["model"]):
                models.append(info["model"])
            if isinstance(total, dict) and total == last_total:
                counts["repeated_token_count"] += 1
                continue
            last = info.get("last_token_usage")
            if isinstance(total, dict):
                if last_total is not None and (
                    _restarted(last_total, total, last) or (resumed and not _continues(last_total, total, last))
                ):
                    closed.update({k: _int(v) for k, v in last_total.items()})
                    segments += 1
                    counts["token_counter_segments"] = segments
                resumed = False
                last_total = total
            if isinstance(last, dict):
                step = open_step if open_step is not None else new_agent_step(ts)
                if open_step is None:
                    step.setdefault("extra", {})["usage_only"] = True
                if models:
                    step["model_name"] = models[-1]
                step["metrics"] = {**usage_to_atif(last), "extra": dict(last)}
            open_step = None
        elif kind == "response_item":
            ptype = payload.get("type")
            if ptype == "message":
                role = payload.get("role")
                text = content_text(
                    [{"type": "text", "text": b.get("text")} if isinstance(b, dict) and "text" in b else b for b in payload["content"]]
                    if isinstance(payload.get("content"), list)
                    else payload.get("content")
                )
                if role == "assistant":
                    open_step = open_step or new_agent_step(ts)
                    open_step["_text"].append(text)
                else:
                    open_step = None
                    step = {"source": "user" if role == "user" else "system", "message": text}
                    if isinstance(ts, str):
                        step["timestamp"] = ts
                    if role not in ("user", "system"):
                        step["extra"] = {"role": role}
                    elif role == "user" and text.lstrip().startswith(_CONTEXT_TAGS):
                        # Codex injects its environment and AGENTS.md as user messages.
                        step["extra"] = {"is_meta": True}
                    steps.append(step)
            elif ptype == "reasoning":
                open_step = open_step or new_agent_step(ts)
                summary = payload.get("summary")
                texts = (
                    [b.get("text") for b in summary if isinstance(b, dict) and isinstance(b.get("text"), str)]
                    if isinstance(summary, list)
                    else []
                )
                open_step["_reasoning"].extend(texts)
            elif ptype in ("function_call", "custom_tool_call", "local_shell_call", "web_search_call"):
                open_step = open_step or new_agent_step(ts)
                cid = payload.get("call_id") or payload.get("id") or f"line{lineno}"
                if ptype == "function_call":
                    name, args = payload.get("name"), decode_arguments(payload.get("arguments"))
                elif ptype == "custom_tool_call":
                    name, args = payload.get("name"), decode_arguments(payload.get("input"))
                else:
                    name = "local_shell" if ptype == "local_shell_call" else "web_search"
                    args = payload.get("action") if isinstance(payload.get("action"), dict) else {}
                tc = {"tool_call_id": str(cid), "function_name": str(name or "unknown"), "arguments": args}
                open_step.setdefault("tool_calls", []).append(tc)
                tool_steps[str(cid)] = open_step
            elif ptype in ("function_call_output", "custom_tool_call_output"):
                cid = str(payload.get("call_id"))
                text, rextra = _output_result(payload.get("output"))
                step = tool_steps.get(cid)
                if step is None:
                    counts["unmatched_tool_output"] += 1
                    steps.append({"source": "user", "message": f"[tool output for {cid}] {text}", "extra": {"unmatched_tool_output": True}})
                    continue
                result: dict[str, Any] = {"source_call_id": cid, "content": text}
                if rextra:
                    result["extra"] = rextra
                step.setdefault("observation", {"results": []})["results"].append(result)
            else:
                counts[f"skipped_item:{ptype}"] += 1
        else:
            counts[f"skipped_type:{kind}"] += 1
    if recognised == 0:
        raise InputError(str(p), STAGE, "no Codex rollout line (session_meta, turn_context, response_item, event_msg)")

    for i, step in enumerate(steps, start=1):
        step["step_id"] = i
        if step["source"] == "agent":
            text = "\n\n".join(t for t in step.pop("_text") if t)
            step["message"] = text
            reasoning = [t for t in step.pop("_reasoning") if t]
            if reasoning:
                step["reasoning_content"] = "\n\n".join(reasoning)
    agent: dict[str, Any] = {"name": AGENT_NAME, "version": str(meta.get("cli_version") or "unknown")}
    if models:
        agent["model_name"] = models[0]
    aextra = {k: meta[k] for k in ("cwd", "originator", "source", "model_provider", "git") if meta.get(k) not in (None, "", {})}
    if len(models) > 1:
        aextra["models"] = models
    if aextra:
        agent["extra"] = aextra
    final: dict[str, Any] = {}
    if last_total is not None:
        summed = dict(closed)
        for k, v in last_total.items():
            summed[k] = summed.get(k, 0) + _int(v)
        m = usage_to_atif(summed)
        final = {
            "total_prompt_tokens": m["prompt_tokens"],
            "total_completion_tokens": m["completion_tokens"],
            "total_cached_tokens": m["cached_tokens"],
        }
        final["extra"] = {k: summed[k] for k in ("total_tokens", "reasoning_output_tokens") if k in last_total}
        final["extra"]["source"] = (
            "last total_token_usage (cumulative)"
            if segments == 1
            else f"sum of the last total_token_usage of {segments} segments (resumed or reset counter)"
        )
    final["total_steps"] = len(steps)
    conv: dict[str, Any] = {
        "name": CONVERTER,
        "source_format": "codex_rollout",
        "skipped": dict(sorted(counts.items())),
        "lines": stats.as_dict(),
    }
    if stats.warnings():
        conv["warnings"] = stats.warnings()
    return {
        "schema_version": ATIF_VERSION,
        "session_id": str(meta.get("id") or p.stem),
        "agent": agent,
        "steps": steps,
        "final_metrics": final,
        "extra": {"converter": conv},
    }
