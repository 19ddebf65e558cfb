"""Claude Code transcripts (session JSONL, ``stream-json`` output, JSON export) -> ATIF.

Claude Code has no official transcript schema; the shapes handled here are those described in
``fixtures/real/FORMATS.md`` §7-8 and seen in real sessions (CLI 1.0 to 2.1). The output is an
ATIF trajectory dict in the shape Harbor's claude-code converter writes, with these choices:

- one ATIF agent step per API response: the content-block lines that Claude Code writes for one
  ``message.id`` (+ ``requestId``) are merged, so that the usage it repeats on each line is
  counted once. Its usage is the one of the line with the most output tokens (earlier block
  lines carry partial output counts);
- ATIF token semantics: ``prompt_tokens = input_tokens + cache_read_input_tokens +
  cache_creation_input_tokens`` (Anthropic's ``input_tokens`` excludes cache, ATIF's includes
  it), ``cached_tokens = cache_read_input_tokens``, ``completion_tokens = output_tokens``; the
  Anthropic usage is copied into ``metrics.extra``; ``cost_usd`` only where the transcript has a
  cost (old ``costUSD`` lines, the stream-json ``result``);
- subagents (``<session>/subagents/agent-*.jsonl`` beside the session file, or sidechain lines
  kept inline by older CLIs, or stream-json events with a ``parent_tool_use_id``) are embedded
  as ATIF-v1.7 ``subagent_trajectories`` with a ``trajectory_id``, referenced from the result of
  the ``Task`` call that spawned them; the root ``final_metrics`` sum every deduplicated call,
  subagents included (``final_metrics.extra.includes_subagents``). Without subagents the output
  is ATIF-v1.6;
- rewinds (the user re-prompting from an earlier message, two user children of one parent) keep
  every step, since every call was paid for, and mark the abandoned branch with
  ``extra.on_abandoned_branch``; compaction summaries are user steps with
  ``extra.is_compact_summary``;
- ``system``, ``summary``, ``progress``, ``file-history-snapshot``, ``queue-operation`` and
  unknown line types are skipped; lines that are not JSON objects (blank, truncated, ``42``)
  are skipped. Both are counted in ``extra.converter``.
"""

from __future__ import annotations

import os
from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from ..core.fileio import loads_lenient, read_bytes, read_json
from ..core.tools import is_permission_denial
from ..core.trial import InputError
from .atif import decode_arguments
from .jsonl_lines import LineStats, lines_to_objects, read_jsonl_objects

ATIF_VERSION = "ATIF-v1.6"
# subagent_trajectories / trajectory_id are ATIF-v1.7 fields.
ATIF_VERSION_EMBEDDED = "ATIF-v1.7"
AGENT_NAME = "claude-code"
CONVERTER = "analysis_lib.ingest.claude_code"
STAGE = "convert"

_USAGE_INT_FIELDS = ("input_tokens", "output_tokens", "cache_read_input_tokens", "cache_creation_input_tokens")


def _int(v: Any) -> int:
    """A token count as an int; anything else (None, strings, bools) counts as 0."""
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return 0
    return int(v)


def _num(v: Any) -> float | None:
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return None
    return float(v)


def usage_to_atif(usage: dict[str, Any]) -> dict[str, int]:
    """Anthropic usage -> ATIF token counts (prompt includes cache reads and cache writes)."""
    inp = _int(usage.get("input_tokens"))
    cr = _int(usage.get("cache_read_input_tokens"))
    cc = _int(usage.get("cache_creation_input_tokens"))
    return {"prompt_tokens": inp + cr + cc, "completion_tokens": _int(usage.get("output_tokens")), "cached_tokens": cr}


def content_text(content: Any) -> str:
    """Text of a message or tool_result content (string, block list or block); images as ``[image]``."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, dict):
        content = [content]
    if isinstance(content, list):
        parts = []
        for block in content:
            if isinstance(block, str):
                parts.append(block)
            elif isinstance(block, dict):
                kind = block.get("type")
                if kind == "text" or (kind is None and isinstance(block.get("text"), str)):
                    parts.append(str(block.get("text") or ""))
                elif kind == "image":
                    parts.append("[image]")
                elif kind == "tool_result":
                    parts.append(content_text(block.get("content")))
                else:
                    parts.append(f"[{kind}]")
        return "\n\n".join(p for p in parts if p)
    return str(content)


def model_usage_totals(model_usage: Any) -> dict[str, int] | None:
    """Anthropic-style token totals summed over a ``result.modelUsage`` object (every model, subagents included)."""
    if not isinstance(model_usage, dict) or not model_usage:
        return None
    keys = {"input_tokens": "inputTokens", "output_tokens": "outputTokens", "cache_read_input_tokens": "cacheReadInputTokens",
            "cache_creation_input_tokens": "cacheCreationInputTokens"}
    out = dict.fromkeys(keys, 0)
    for per_model in model_usage.values():
        if isinstance(per_model, dict):
            for k, src in keys.items():
                out[k] += _int(per_model.get(src))
    return out


@dataclass
class _Call:
    """One API response: its step, the best usage seen on its lines, its cost."""

    step: dict[str, Any]
    usage: dict[str, Any] | None = None
    cost_usd: float | None = None


@dataclass
class _Builder:
    """Accumulates the ATIF steps of one trajectory (main session or one subagent)."""

    steps: list[dict[str, Any]] = field(default_factory=list)
    calls: dict[Any, _Call] = field(default_factory=dict)
    tool_steps: dict[str, dict[str, Any]] = field(default_factory=dict)
    models: list[str] = field(default_factory=list)
    counts: Counter = field(default_factory=Counter)
    cwds: list[str] = field(default_factory=list)
    branches: list[str] = field(default_factory=list)
    versions: list[str] = field(default_factory=list)
    session_id: str | None = None
    # uuid of each line that produced or extended a step -> that step (rewind marking).
    uuid_steps: dict[str, dict[str, Any]] = field(default_factory=dict)
    compactions: list[dict[str, Any]] = field(default_factory=list)
    # subagent agentId -> tool_use id of the call that spawned it.
    agent_links: dict[str, str] = field(default_factory=dict)
    seen_uuids: set[str] = field(default_factory=set)

    def note_envelope(self, line: dict[str, Any]) -> None:
        for key, bucket in (("cwd", self.cwds), ("gitBranch", self.branches), ("version", self.versions)):
            v = line.get(key)
            if isinstance(v, str) and v and v not in bucket:
                bucket.append(v)
        sid = line.get("sessionId") or line.get("session_id")
        if self.session_id is None and isinstance(sid, str):
            self.session_id = sid

    def add_line(self, lineno: int, line: dict[str, Any]) -> None:
        """Dispatch one transcript/stream line; unknown kinds are counted and skipped."""
        uid = line.get("uuid")
        if isinstance(uid, str):
            # A resumed session may repeat lines of the one it continues: take each line once.
            if uid in self.seen_uuids:
                self.counts["duplicate_line"] += 1
                return
            self.seen_uuids.add(uid)
        msg = line.get("message")
        kind = line.get("type")
        if kind is None and isinstance(msg, dict):
            # Minimal lines (ccusage fixtures) carry only the message.
            kind = msg.get("role")
        if kind == "assistant":
            if not isinstance(msg, dict):
                self.counts["malformed_message"] += 1
                return
            self.note_envelope(line)
            self._add_assistant(lineno, line, msg)
        elif kind == "user":
            if not isinstance(msg, dict):
                self.counts["malformed_message"] += 1
                return
            self.note_envelope(line)
            self._add_user(lineno, line, msg)
        else:
            if kind == "system" and line.get("subtype") == "compact_boundary":
                meta = line.get("compactMetadata") if isinstance(line.get("compactMetadata"), dict) else {}
                self.compactions.append({"timestamp": line.get("timestamp"), "trigger": meta.get("trigger"), "pre_tokens": meta.get("preTokens")})
            if kind == "progress" and isinstance(line.get("data"), dict):
                aid, tid = line["data"].get("agentId"), line.get("parentToolUseID")
                if isinstance(aid, str) and isinstance(tid, str):
                    self.agent_links.setdefault(aid, tid)
            self.counts[f"skipped_type:{kind if isinstance(kind, str) else 'none'}"] += 1

    def _add_assistant(self, lineno: int, line: dict[str, Any], msg: dict[str, Any]) -> None:
        mid = msg.get("id")
        # message.id + requestId identify one API call; lines without an id are their own call.
        key: Any = (mid, line.get("requestId")) if isinstance(mid, str) and mid else ("line", lineno)
        call = self.calls.get(key)
        if call is None:
            step: dict[str, Any] = {"source": "agent", "message": ""}
            if isinstance(line.get("timestamp"), str):
                step["timestamp"] = line["timestamp"]
            model = msg.get("model")
            if isinstance(model, str):
                step["model_name"] = model
                if model not in self.models:
                    self.models.append(model)
            extra = {
                "message_id": mid if isinstance(mid, str) else None,
                "request_id": line.get("requestId"),
                "uuid": line.get("uuid"),
                "parent_uuid": line.get("parentUuid"),
            }
            step["extra"] = {k: v for k, v in extra.items() if isinstance(v, str)}
            if line.get("isSidechain") is True:
                step["extra"]["is_sidechain"] = True
            if line.get("isApiErrorMessage") is True:
                step["extra"]["is_api_error"] = True
            step["_text"], step["_thinking"] = [], []
            call = self.calls[key] = _Call(step=step)
            self.steps.append(step)
        step = call.step
        if isinstance(line.get("uuid"), str):
            self.uuid_steps.setdefault(line["uuid"], step)
        if isinstance(msg.get("stop_reason"), str):
            step["extra"]["stop_reason"] = msg["stop_reason"]
        usage = msg.get("usage")
        if isinstance(usage, dict) and (call.usage is None or _int(usage.get("output_tokens")) >= _int(call.usage.get("output_tokens"))):
            call.usage = usage
        cost = _num(line.get("costUSD"))
        if cost is not None:
            call.cost_usd = cost if call.cost_usd is None else max(call.cost_usd, cost)
        content = msg.get("content")
        if isinstance(content, str):
            step["_text"].append(content)
            return
        for block in content if isinstance(content, list) else []:
            if not isinstance(block, dict):
                if isinstance(block, str):
                    step["_text"].append(block)
                continue
            btype = block.get("type")
            if btype == "text":
                step["_text"].append(str(block.get("text") or ""))
            elif btype == "thinking":
                step["_thinking"].append(str(block.get("thinking") or ""))
            elif btype in ("tool_use", "server_tool_use"):
                tid = block.get("id")
                tc = {
                    "tool_call_id": str(tid) if tid is not None else f"line{lineno}-{len(step.get('tool_calls', []))}",
                    "function_name": str(block.get("name") or "unknown"),
                    "arguments": decode_arguments(block.get("input")),
                }
                if tc["tool_call_id"] in self.tool_steps:
                    self.counts["duplicate_tool_use"] += 1
                    continue
                step.setdefault("tool_calls", []).append(tc)
                self.tool_steps[tc["tool_call_id"]] = step
            elif btype == "web_search_tool_result" or btype == "tool_result":
                self._attach_result(block)
            else:
                self.counts[f"skipped_block:{btype}"] += 1

    def _attach_result(self, block: dict[str, Any]) -> bool:
        """Put a tool_result on the step of its tool_use; False when no such call was seen."""
        tid = block.get("tool_use_id")
        step = self.tool_steps.get(str(tid)) if tid is not None else None
        if step is None:
            return False
        result: dict[str, Any] = {"source_call_id": str(tid), "content": content_text(block.get("content"))}
        if isinstance(block.get("is_error"), bool):
            result["extra"] = {"is_error": block["is_error"]}
            if block["is_error"] and is_permission_denial(result["content"]):
                result["extra"]["permission_denied"] = True
        step.setdefault("observation", {"results": []})["results"].append(result)
        return True

    def _add_user(self, lineno: int, line: dict[str, Any], msg: dict[str, Any]) -> None:
        content = msg.get("content")
        texts: list[str] = []
        results: list[dict[str, Any]] = []
        if isinstance(content, str):
            texts.append(content)
        elif isinstance(content, list):
            for block in content:
                if isinstance(block, dict) and block.get("type") == "tool_result":
                    results.append(block)
                else:
                    t = content_text([block])
                    if t:
                        texts.append(t)
        else:
            self.counts["empty_user_message"] += 1
            return
        tur = line.get("toolUseResult", line.get("tool_use_result"))
        for block in results:
            if not self._attach_result(block):
                self.counts["unmatched_tool_result"] += 1
                texts.append(f"[tool_result for {block.get('tool_use_id')}] {content_text(block.get('content'))}")
            # The Task call's result names the subagent it ran (agentId -> subagents/agent-<id>.jsonl).
            if isinstance(tur, dict) and isinstance(tur.get("agentId"), str) and block.get("tool_use_id") is not None:
                self.agent_links.setdefault(tur["agentId"], str(block["tool_use_id"]))
        if results and isinstance(line.get("uuid"), str):
            step = self.tool_steps.get(str(results[0].get("tool_use_id")))
            if step is not None:
                self.uuid_steps.setdefault(line["uuid"], step)
        if not texts:
            if not results:
                self.counts["empty_user_message"] += 1
            return
        step = {"source": "user", "message": "\n\n".join(texts)}
        if isinstance(line.get("timestamp"), str):
            step["timestamp"] = line["timestamp"]
        extra: dict[str, Any] = {k: line[s] for k, s in (("uuid", "uuid"), ("parent_uuid", "parentUuid")) if isinstance(line.get(s), str)}
        for flag, src in (("is_meta", "isMeta"), ("is_compact_summary", "isCompactSummary"), ("is_sidechain", "isSidechain")):
            if line.get(src) is True:
                extra[flag] = True
        if extra:
            step["extra"] = extra
        if isinstance(line.get("uuid"), str):
            self.uuid_steps.setdefault(line["uuid"], step)
        self.steps.append(step)

    def finish(self) -> None:
        """Turn accumulated blocks into ATIF fields and attach per-call metrics."""
        for call in self.calls.values():
            step = call.step
            text = "\n\n".join(t for t in step.pop("_text") if t)
            # Claude often opens with a whitespace-only text block before a tool call.
            step["message"] = text if text.strip() else ""
            thinking = [t for t in step.pop("_thinking") if t]
            if thinking:
                step["reasoning_content"] = "\n\n".join(thinking)
            if call.usage is not None or call.cost_usd is not None:
                metrics: dict[str, Any] = usage_to_atif(call.usage or {})
                if call.cost_usd is not None:
                    metrics["cost_usd"] = call.cost_usd
                if call.usage is not None:
                    metrics["extra"] = dict(call.usage)
                step["metrics"] = metrics

    def call_totals(self) -> dict[Any, tuple[dict[str, Any] | None, float | None]]:
        return {k: (c.usage, c.cost_usd) for k, c in self.calls.items()}


def _abandoned_uuids(lines: list[tuple[int, dict]]) -> set[str]:
    """uuids of lines on rewound branches: all but the last user child of a parent with several.

    Parallel tool calls also give a parent several children (an assistant line and a tool
    result); only children that are user prompts (text, not tool results) mark a rewind.
    """
    children: dict[str, list[str]] = defaultdict(list)
    prompts: dict[str, list[str]] = defaultdict(list)
    seen: set[str] = set()
    for _, line in lines:
        uid, parent = line.get("uuid"), line.get("parentUuid")
        if not isinstance(uid, str) or not isinstance(parent, str) or uid in seen:
            continue
        seen.add(uid)
        children[parent].append(uid)
        msg = line.get("message")
        if line.get("type") == "user" and isinstance(msg, dict) and not line.get("isMeta"):
            content = msg.get("content")
            is_prompt = isinstance(content, str) or (
                isinstance(content, list) and not any(isinstance(b, dict) and b.get("type") == "tool_result" for b in content)
            )
            if is_prompt:
                prompts[parent].append(uid)
    abandoned: set[str] = set()
    for kids in prompts.values():
        for root in kids[:-1]:
            stack = [root]
            while stack:
                u = stack.pop()
                if u not in abandoned:
                    abandoned.add(u)
                    stack.extend(children.get(u, ()))
    return abandoned


def _sum_calls(calls: Iterable[tuple[dict[str, Any] | None, float | None]]) -> dict[str, Any]:
    tot = {"total_prompt_tokens": 0, "total_completion_tokens": 0, "total_cached_tokens": 0}
    extra = {"total_cache_creation_input_tokens": 0, "total_cache_read_input_tokens": 0, "total_input_tokens": 0, "api_calls": 0}
    cost, has_cost, has_usage = 0.0, False, False
    for usage, c in calls:
        extra["api_calls"] += 1
        if usage is not None:
            has_usage = True
            m = usage_to_atif(usage)
            tot["total_prompt_tokens"] += m["prompt_tokens"]
            tot["total_completion_tokens"] += m["completion_tokens"]
            tot["total_cached_tokens"] += m["cached_tokens"]
            extra["total_cache_creation_input_tokens"] += _int(usage.get("cache_creation_input_tokens"))
            extra["total_cache_read_input_tokens"] += _int(usage.get("cache_read_input_tokens"))
            extra["total_input_tokens"] += _int(usage.get("input_tokens"))
        if c is not None:
            cost += c
            has_cost = True
    # No usage anywhere means unknown, not zero (metrics treat a missing total as unknown).
    out: dict[str, Any] = dict(tot) if has_usage else {}
    if not has_usage:
        extra = {"api_calls": extra["api_calls"]}
    if has_cost:
        out["total_cost_usd"] = round(cost, 10)
    out["extra"] = extra
    return out


def _assemble(
    b: _Builder, *, trajectory_id: str | None = None, version: str = ATIF_VERSION, agent_extra: dict[str, Any] | None = None
) -> dict[str, Any]:
    """One ATIF trajectory dict from a finished builder (step ids from 1, own final_metrics)."""
    steps = b.steps
    for i, step in enumerate(steps, start=1):
        step["step_id"] = i
    model = next((m for m in b.models if m != "<synthetic>"), b.models[0] if b.models else None)
    agent: dict[str, Any] = {"name": AGENT_NAME, "version": b.versions[-1] if b.versions else "unknown"}
    if model:
        agent["model_name"] = model
    aextra: dict[str, Any] = {}
    if b.cwds:
        aextra["cwds"] = b.cwds
    if b.branches:
        aextra["git_branches"] = b.branches
    if len(b.models) > 1:
        aextra["models"] = b.models
    aextra.update(agent_extra or {})
    if aextra:
        agent["extra"] = aextra
    traj: dict[str, Any] = {"schema_version": version}
    if trajectory_id is not None:
        traj["trajectory_id"] = trajectory_id
    traj["session_id"] = b.session_id or trajectory_id or "unknown"
    traj["agent"] = agent
    traj["steps"] = steps
    fm = _sum_calls(b.call_totals().values())
    fm["total_steps"] = len(steps)
    traj["final_metrics"] = fm
    return traj


def _converter_extra(source_format: str, stats: LineStats | None, builders: list[_Builder], warnings: list[str]) -> dict[str, Any]:
    counts: Counter = Counter()
    for b in builders:
        counts.update(b.counts)
    out: dict[str, Any] = {"name": CONVERTER, "source_format": source_format, "skipped": dict(sorted(counts.items()))}
    if stats is not None:
        out["lines"] = stats.as_dict()
    if warnings:
        out["warnings"] = warnings
    return out


@dataclass
class _SubSpec:
    """A subagent's lines, where they came from and the tool call that spawned it (if known)."""

    trajectory_id: str
    lines: list[tuple[int, dict]]
    stats: LineStats | None = None
    tool_use_id: str | None = None
    agent_extra: dict[str, Any] = field(default_factory=dict)


def _build(lines: list[tuple[int, dict]]) -> _Builder:
    b = _Builder()
    for lineno, line in lines:
        b.add_line(lineno, line)
    b.finish()
    abandoned = _abandoned_uuids(lines)
    for uid in abandoned:
        step = b.uuid_steps.get(uid)
        if step is not None:
            step.setdefault("extra", {})["on_abandoned_branch"] = True
    return b


def _combine(
    main_lines: list[tuple[int, dict]],
    subs: list[_SubSpec],
    *,
    source_format: str,
    stats: LineStats | None,
    warnings: list[str],
) -> dict[str, Any]:
    """Build the root trajectory and its embedded subagents; root totals count each call once."""
    root = _build(main_lines)
    if not root.steps and not subs:
        raise InputError("<memory>", STAGE, "no Claude Code user or assistant message found")
    linked = dict(root.agent_links)
    sub_trajs: list[dict[str, Any]] = []
    sub_builders: list[_Builder] = []
    seen_calls = dict(root.call_totals())
    sub_refs: dict[str, str] = {}
    for spec in subs:
        sb = _build(spec.lines)
        if sb.session_id is None:
            sb.session_id = root.session_id
        sub_builders.append(sb)
        for k, v in sb.call_totals().items():
            seen_calls.setdefault(k, v)
        sub_trajs.append(_assemble(sb, trajectory_id=spec.trajectory_id, version=ATIF_VERSION_EMBEDDED, agent_extra=spec.agent_extra))
        tool_use_id = spec.tool_use_id or linked.get(spec.agent_extra.get("agent_id", ""))
        if tool_use_id:
            sub_refs[tool_use_id] = spec.trajectory_id
    unlinked = []
    for tool_use_id, tid in sub_refs.items():
        step = root.tool_steps.get(tool_use_id)
        if step is None:
            unlinked.append(tid)
            continue
        ref = {"trajectory_id": tid, "session_id": root.session_id or "unknown"}
        results = step.setdefault("observation", {"results": []})["results"]
        target = next((r for r in results if r.get("source_call_id") == tool_use_id), None)
        if target is None:
            target = {"source_call_id": tool_use_id, "content": ""}
            results.append(target)
        target.setdefault("subagent_trajectory_ref", []).append(ref)
    unlinked += [t["trajectory_id"] for t in sub_trajs if t["trajectory_id"] not in sub_refs.values()]
    known = {s.agent_extra.get("agent_id") for s in subs}
    for aid in sorted(set(linked) - known):
        warnings.append(
            f"subagent {aid} ran (call {linked[aid]}) but its transcript agent-{aid}.jsonl is missing; its usage is not counted"
        )
    traj = _assemble(root, trajectory_id="main" if sub_trajs else None, version=ATIF_VERSION_EMBEDDED if sub_trajs else ATIF_VERSION)
    if sub_trajs:
        # Root totals: every API call once, main and subagents (a call seen twice counts once).
        fm = _sum_calls(seen_calls.values())
        fm["total_steps"] = len(traj["steps"])
        fm["extra"]["includes_subagents"] = True
        fm["extra"]["main_only"] = {k: v for k, v in traj["final_metrics"].items() if k not in ("extra", "total_steps")}
        traj["final_metrics"] = fm
        traj["subagent_trajectories"] = sub_trajs
    extra: dict[str, Any] = {"converter": _converter_extra(source_format, stats, [root, *sub_builders], warnings)}
    if root.compactions:
        extra["compactions"] = root.compactions
    if unlinked:
        extra["unlinked_subagents"] = sorted(set(unlinked))
    traj["extra"] = extra
    return traj


def _with_path(exc: InputError, path: str | os.PathLike) -> InputError:
    if exc.error.path == "<memory>":
        return InputError(str(path), exc.error.stage, exc.error.message)
    return exc


# How much of a file is read to tell whose subagent it is (its first lines name the session).
_SESSION_HEAD_BYTES = 65536


def parent_session(path: str | os.PathLike) -> Path | None:
    """The session transcript a Claude Code subagent file belongs to; None for any other file.

    Both layouts: ``<session>/subagents/agent-<id>.jsonl`` (Claude Code 2.1.2 and later) and
    ``agent-<id>.jsonl`` beside ``<session>.jsonl`` (2.0), whose sidechain lines name the session
    (``sessionId``). Only the file's first bytes are read.
    """
    p = Path(path)
    if not p.name.startswith("agent-") or p.suffix != ".jsonl":
        return None
    if p.parent.name == "subagents":
        session = p.parent.parent.parent / f"{p.parent.parent.name}.jsonl"
        return session if session.is_file() else None
    try:
        with open(p, "rb") as fh:
            head = fh.read(_SESSION_HEAD_BYTES)
    except OSError:
        return None
    for raw in head.splitlines()[:20]:
        try:
            line = orjson.loads(raw)
        except orjson.JSONDecodeError:
            continue  # a blank line, or the last one cut by the read
        if isinstance(line, dict) and line.get("isSidechain") is True and isinstance(line.get("sessionId"), str):
            sid = line["sessionId"]
            session = p.parent / f"{sid}.jsonl"
            return session if "/" not in sid and session != p and session.is_file() else None
    return None


def subagent_files(path: str | os.PathLike) -> list[Path]:
    """The subagent transcripts of a session file, in both layouts (see :func:`parent_session`)."""
    p = Path(path)
    folder = p.with_suffix("") / "subagents"
    nested = sorted(f for f in folder.glob("agent-*.jsonl") if f.is_file()) if folder.is_dir() else []
    beside = sorted(f for f in p.parent.glob("agent-*.jsonl") if f != p and f.is_file() and parent_session(f) == p)
    return nested + beside


def transcript_to_atif(path: str | os.PathLike, *, include_subagents: bool = True,
                       subagents: list[str] | None = None) -> dict[str, Any]:
    """Convert a Claude Code session JSONL (``~/.claude/projects/<cwd>/<session>.jsonl``) to ATIF.

    Its subagent files (``<session>/subagents/agent-*.jsonl``, or ``agent-*.jsonl`` beside it for
    Claude Code 2.0: :func:`subagent_files`, or ``subagents`` when discovery already found them) and
    sidechain lines kept inline by older CLIs become embedded ``subagent_trajectories`` (when
    ``include_subagents``); otherwise they are left out and the totals are the main session's only.
    Raises :class:`InputError` naming the file when it is unreadable, empty or has no message.
    """
    p = Path(path)
    lines, stats = read_jsonl_objects(p, STAGE)
    warnings: list[str] = stats.warnings()
    main_lines = [(n, o) for n, o in lines if o.get("isSidechain") is not True]
    if not any(o.get("type") in ("user", "assistant") for _, o in main_lines):
        # A subagent file read on its own: every line is a sidechain; it is the main trajectory.
        main_lines, lines = lines, []
    inline: dict[str, list[tuple[int, dict]]] = {}
    group = None
    for n, o in lines:
        if o.get("isSidechain") is True:
            aid = o.get("agentId")
            if isinstance(aid, str):
                key = f"agent-{aid}"
            else:
                # Older CLIs: a sidechain starts at a line without parent.
                if group is None or o.get("parentUuid") is None:
                    group = f"sidechain-{len([k for k in inline if k.startswith('sidechain-')]) + 1}"
                key = group
            inline.setdefault(key, []).append((n, o))
    subs: list[_SubSpec] = []
    if include_subagents:
        for f in subagent_files(p) if subagents is None else [Path(f) for f in subagents]:
            try:
                sub_lines, sub_stats = read_jsonl_objects(f, STAGE)
            except InputError as exc:
                warnings.append(f"subagent {f.name}: {exc.error.message}")
                continue
            aid = f.stem[len("agent-") :]
            aextra: dict[str, Any] = {"agent_id": aid, "source_file": os.path.relpath(f, p.parent).replace(os.sep, "/")}
            meta_path = f.with_suffix(".meta.json")
            tool_use_id = None
            if meta_path.is_file():
                try:
                    meta = read_json(meta_path, STAGE)
                except InputError as exc:
                    warnings.append(f"subagent meta {meta_path.name}: {exc.error.message}")
                    meta = None
                if isinstance(meta, dict):
                    aextra.update({k: meta[k] for k in ("agentType", "description") if isinstance(meta.get(k), str)})
                    tool_use_id = meta.get("toolUseId") if isinstance(meta.get("toolUseId"), str) else None
            if sub_stats.unparsable or sub_stats.non_object:
                aextra["skipped_lines"] = sub_stats.unparsable + sub_stats.non_object
            subs.append(_SubSpec(trajectory_id=f.stem, lines=sub_lines, stats=sub_stats, tool_use_id=tool_use_id, agent_extra=aextra))
        file_ids = {s.trajectory_id for s in subs}
        for key, group_lines in inline.items():
            if key in file_ids:
                continue  # the subagent file holds the same conversation
            aextra = {"inline_sidechain": True}
            if key.startswith("agent-"):
                aextra["agent_id"] = key[len("agent-") :]
            subs.append(_SubSpec(trajectory_id=key, lines=group_lines, agent_extra=aextra))
    elif inline:
        warnings.append(f"{sum(len(v) for v in inline.values())} inline sidechain lines left out (include_subagents=False)")
    try:
        traj = _combine(main_lines, subs, source_format="claude_code_jsonl", stats=stats, warnings=warnings)
    except InputError as exc:
        raise _with_path(exc, p) from None
    if traj["session_id"] == "unknown":
        traj["session_id"] = p.stem  # Claude Code names session files after the session id
    return traj


def claude_export_to_atif(path: str | os.PathLike) -> dict[str, Any]:
    """Convert the ``{"loglines": [...]}`` JSON export of a Claude Code session to ATIF."""
    doc = read_json(path, STAGE)
    if not isinstance(doc, dict) or not isinstance(doc.get("loglines"), list):
        raise InputError(str(path), STAGE, "not a Claude Code export (expected an object with a 'loglines' list)")
    stats = LineStats(lines=len(doc["loglines"]))
    lines = []
    for i, o in enumerate(doc["loglines"], start=1):
        if isinstance(o, dict):
            lines.append((i, o))
        else:
            stats.non_object += 1
    stats.objects = len(lines)
    if not lines:
        raise InputError(str(path), STAGE, "export has no logline objects")
    try:
        return _combine(lines, [], source_format="claude_export", stats=stats, warnings=[])
    except InputError as exc:
        raise _with_path(exc, path) from None


# --- stream-json ------------------------------------------------------------------------

_STREAM_SKIP = {"stream_event", "control_request", "control_response", "keep_alive"}


def _stream_events(path_or_lines: Any) -> tuple[list[tuple[int, dict]], LineStats | None, str, dict[str, Any]]:
    """Normalise the accepted inputs to ``[(n, event)]``; also returns the source name and mcpbr meta."""
    meta: dict[str, Any] = {}
    if isinstance(path_or_lines, (str, os.PathLike)):
        source = str(path_or_lines)
        data = read_bytes(path_or_lines, STAGE)
        if not data.strip():
            raise InputError(source, STAGE, "empty file")
        try:
            doc = loads_lenient(data, source, STAGE)
        except InputError:
            doc = None  # JSONL: one event per line
        # An mcpbr log is one JSON document {instance_id, run_type, events: [...]}.
        if isinstance(doc, dict) and isinstance(doc.get("events"), list):
            events = doc["events"]
            meta = {k: doc[k] for k in ("instance_id", "run_type") if k in doc}
            stats = LineStats(lines=len(events))
            lines = [(i, e) for i, e in enumerate(events, start=1) if isinstance(e, dict)]
            stats.non_object = len(events) - len(lines)
            stats.objects = len(lines)
            if not lines:
                raise InputError(source, STAGE, "mcpbr log without stream-json events")
        else:
            lines, stats = lines_to_objects(data.splitlines(), source, STAGE)
        return lines, stats, source, meta
    if isinstance(path_or_lines, dict):
        if not isinstance(path_or_lines.get("events"), list):
            raise InputError("<memory>", STAGE, "expected an mcpbr log with an 'events' list")
        meta = {k: path_or_lines[k] for k in ("instance_id", "run_type") if k in path_or_lines}
        path_or_lines = path_or_lines["events"]
    items = list(path_or_lines)
    if items and all(isinstance(x, dict) for x in items):
        return list(enumerate(items, start=1)), LineStats(lines=len(items), objects=len(items)), "<memory>", meta
    raw = [x.encode() if isinstance(x, str) else x for x in items if isinstance(x, (str, bytes))]
    lines, stats = lines_to_objects(raw, "<memory>", STAGE)
    return lines, stats, "<memory>", meta


def stream_json_to_atif(path_or_lines: Any, prompt: str | None = None) -> dict[str, Any]:
    """Convert ``claude -p --output-format stream-json --verbose`` output to ATIF.

    Accepts a path (JSONL, or an mcpbr log ``{instance_id, run_type, events}``), an iterable of
    lines, a list of event dicts, or an mcpbr log dict. Events with a ``parent_tool_use_id``
    (subagent traffic) become embedded subagent trajectories linked to that tool call. The last
    ``result`` event's ``total_cost_usd`` and its ``modelUsage`` totals (every model, subagents
    included; both cumulative when background work adds a later result) win over the sums of the
    steps; without ``modelUsage``, its ``usage`` (main thread only). ``claude -p`` does not echo
    the prompt: given ``prompt``, it becomes the first (user) step, as in the session transcript.
    """
    lines, stats, source, meta = _stream_events(path_or_lines)
    init: dict[str, Any] = {}
    result: dict[str, Any] | None = None
    main: list[tuple[int, dict]] = []
    by_parent: dict[str, list[tuple[int, dict]]] = {}
    skipped: Counter = Counter()
    denied: set[str] = set()
    notice: dict[str, Any] | None = None
    for n, ev in lines:
        kind = ev.get("type")
        if kind == "system" and ev.get("subtype") == "task_notification":
            notice = ev
        if kind == "system" and ev.get("subtype") == "init":
            if init:
                # A later turn of the same session (a background subagent finished): the transcript
                # has the notification as a user message, stream-json only this second init.
                main.append((n, _notification_line(notice, ev)))
                notice = None
            init = init or ev
        elif kind == "result":
            result = ev
            for d in ev.get("permission_denials") or []:
                if isinstance(d, dict) and isinstance(d.get("tool_use_id"), str):
                    denied.add(d["tool_use_id"])
        elif kind in ("assistant", "user"):
            parent = ev.get("parent_tool_use_id")
            if isinstance(parent, str) and parent:
                by_parent.setdefault(parent, []).append((n, ev))
            else:
                main.append((n, ev))
        else:
            skipped[f"skipped_type:{kind if isinstance(kind, str) else 'none'}"] += 1
    if prompt and not (main and main[0][1].get("type") == "user" and _is_prompt_line(main[0][1])):
        first = main[0][1] if main else {}
        echo = {"type": "user", "message": {"role": "user", "content": prompt}, "session_id": first.get("session_id")}
        if isinstance(first.get("timestamp"), str):
            echo["timestamp"] = first["timestamp"]
        main.insert(0, (0, echo))
    subs = [
        _SubSpec(trajectory_id=f"subagent-{tid}", lines=ls, tool_use_id=tid, agent_extra={"parent_tool_use_id": tid})
        for tid, ls in by_parent.items()
    ]
    warnings = stats.warnings() if stats is not None else []
    try:
        traj = _combine(main, subs, source_format="claude_stream_json", stats=stats, warnings=warnings)
    except InputError as exc:
        raise _with_path(exc, source) from None
    conv = traj["extra"]["converter"]
    for k, v in skipped.items():
        conv["skipped"][k] = conv["skipped"].get(k, 0) + v
    conv["skipped"] = dict(sorted(conv["skipped"].items()))
    if meta:
        traj["extra"]["mcpbr"] = meta
    if init:
        if isinstance(init.get("session_id"), str):
            traj["session_id"] = init["session_id"]
        if isinstance(init.get("claude_code_version"), str):
            for t in (traj, *traj.get("subagent_trajectories", [])):
                if t["agent"]["version"] == "unknown":
                    t["agent"]["version"] = init["claude_code_version"]
        if isinstance(init.get("model"), str) and "model_name" not in traj["agent"]:
            traj["agent"]["model_name"] = init["model"]
        aextra = traj["agent"].setdefault("extra", {})
        if isinstance(init.get("cwd"), str):
            aextra.setdefault("cwds", [init["cwd"]])
        for k in ("tools", "mcp_servers", "permissionMode"):
            if k in init:
                aextra[k] = init[k]
    if result is not None:
        fm = traj["final_metrics"]
        fm["extra"]["step_sums"] = {k: v for k, v in fm.items() if k not in ("extra", "total_steps")}
        usage = model_usage_totals(result.get("modelUsage"))
        fm["extra"]["token_source"] = "modelUsage" if usage is not None else "usage"
        if usage is None:
            usage = result.get("usage")
        if isinstance(usage, dict):
            m = usage_to_atif(usage)
            fm["total_prompt_tokens"] = m["prompt_tokens"]
            fm["total_completion_tokens"] = m["completion_tokens"]
            fm["total_cached_tokens"] = m["cached_tokens"]
            fm["extra"]["total_input_tokens"] = _int(usage.get("input_tokens"))
            fm["extra"]["total_cache_read_input_tokens"] = _int(usage.get("cache_read_input_tokens"))
            fm["extra"]["total_cache_creation_input_tokens"] = _int(usage.get("cache_creation_input_tokens"))
            fm["extra"]["result_usage"] = result.get("usage")
        cost = _num(result.get("total_cost_usd", result.get("cost_usd")))
        if cost is not None:
            fm["total_cost_usd"] = cost
        fm["extra"]["source"] = "result_event"
        traj["extra"]["result"] = {
            k: result[k]
            for k in ("subtype", "is_error", "duration_ms", "duration_api_ms", "num_turns", "modelUsage", "permission_denials")
            if k in result
        }
        if isinstance(result.get("session_id"), str) and traj["session_id"] == "unknown":
            traj["session_id"] = result["session_id"]
    if denied:
        _mark_denied(traj, denied)
    return traj


def _notification_line(notice: dict[str, Any] | None, init: dict[str, Any]) -> dict[str, Any]:
    """The user step that starts a later turn, from the task_notification event before it."""
    n = notice or {}
    text = (
        f"<task-notification> task {n.get('task_id')} ({n.get('tool_use_id')}) {n.get('status')}: {n.get('summary')}"
        if n
        else "<task-notification>"
    )
    line: dict[str, Any] = {"type": "user", "message": {"role": "user", "content": text}, "session_id": init.get("session_id")}
    return line


def _is_prompt_line(ev: dict[str, Any]) -> bool:
    content = (ev.get("message") or {}).get("content")
    return isinstance(content, str) or (
        isinstance(content, list) and not any(isinstance(b, dict) and b.get("type") == "tool_result" for b in content)
    )


def _mark_denied(traj: dict[str, Any], denied: set[str]) -> None:
    """Flag the results of calls Claude Code refused (``result.permission_denials``): the tool never ran."""
    for t in (traj, *traj.get("subagent_trajectories", [])):
        for step in t["steps"]:
            for r in (step.get("observation") or {}).get("results", []):
                if r.get("source_call_id") in denied:
                    r.setdefault("extra", {})["permission_denied"] = True
