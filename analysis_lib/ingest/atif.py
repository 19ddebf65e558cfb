"""ATIF (Agent Trajectory Interchange Format) reader, lenient for every published version.

Accepts ATIF-v1.0 ... v1.8 and later minor versions of major 1 (read with one warning), keeps
unknown fields out of the way instead of rejecting them, decodes tool arguments given as JSON
strings, resolves subagent references (embedded ``subagent_trajectories`` or relative
``trajectory_path`` files) and follows ``continued_trajectory_ref`` chains. Detection is by
content (``schema_version`` starting ``ATIF-``), never by file name.
"""

from __future__ import annotations

import os
import re
from typing import Any

import orjson

from ..core.fileio import loads_lenient, read_bytes, read_json
from ..core.tools import result_is_error
from ..core.trial import FinalMetrics, InputError, Step, ToolCall, Trajectory

KNOWN_MINOR = 8  # ATIF-v1.8 is the newest version this reader was checked against
_VERSION = re.compile(r"^ATIF-v(\d+)\.(\d+)")
# Observation text kept per tool result; the full length is recorded in ToolCall.output_chars.
OUTPUT_KEEP_CHARS = 2000
# An observation longer than this is reported as a warning (huge outputs are truncated, not fatal).
HUGE_OUTPUT_CHARS = 10_000_000


def is_atif(obj: Any) -> bool:
    """True when ``obj`` looks like an ATIF trajectory (a dict whose schema_version starts ATIF-)."""
    return isinstance(obj, dict) and isinstance(obj.get("schema_version"), str) and obj["schema_version"].startswith("ATIF-")


def describe_non_atif(obj: Any) -> str:
    """Name the format of a JSON document that is not ATIF, for a clear error message."""
    if isinstance(obj, list):
        if obj and isinstance(obj[0], dict):
            keys = set(obj[0])
            if {"episode", "prompt", "response"} <= keys:
                return "a list of {episode, prompt, response} records (custom agent log), not ATIF"
            if {"conversations", "episode"} <= keys:
                return "a Harbor traces export, not ATIF"
            if {"action", "source"} <= keys or {"observation", "source"} <= keys:
                return "an OpenHands event list, not ATIF"
        return "a JSON list, not an ATIF trajectory"
    if isinstance(obj, dict):
        sv = obj.get("schema_version")
        if isinstance(sv, str):
            return f"unknown schema_version {sv!r}, not ATIF"
        if {"sessionId", "messages"} <= set(obj):
            return "a gemini-cli native session, not ATIF"
        if "trajectory_format" in obj or {"info", "messages"} <= set(obj):
            return "a mini-swe-agent native trajectory, not ATIF"
        if "steps" in obj:
            return "has steps but no ATIF schema_version"
        return "a JSON object without schema_version, not ATIF"
    return f"a JSON {type(obj).__name__}, not ATIF"


def check_version(version: str, path: str) -> str | None:
    """Raise on an unknown major version; return a warning for a newer minor version."""
    m = _VERSION.match(version)
    if not m:
        raise InputError(path, "trajectory", f"unrecognised ATIF schema_version {version!r}")
    major, minor = int(m.group(1)), int(m.group(2))
    if major != 1:
        raise InputError(path, "trajectory", f"unknown ATIF major version {version!r} (this reader knows ATIF-v1.x)")
    if minor > KNOWN_MINOR:
        return f"{version} is newer than ATIF-v1.{KNOWN_MINOR}; read leniently, unknown fields ignored"
    return None


def _int(v: Any) -> int | None:
    if v is None or isinstance(v, bool):
        return None
    try:
        return int(v)
    except (TypeError, ValueError):
        return None


def _float(v: Any) -> float | None:
    if v is None or isinstance(v, bool):
        return None
    try:
        return float(v)
    except (TypeError, ValueError):
        return None


def content_text(content: Any) -> str:
    """Flatten a message or observation content (str, ContentPart list, None) to text."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for part in content:
            if isinstance(part, dict):
                if part.get("type") == "text" or "text" in part:
                    parts.append(str(part.get("text") or ""))
                elif part.get("type") in ("image", "audio"):
                    src = part.get("source") or {}
                    parts.append(f"[{part.get('type')}: {src.get('path') if isinstance(src, dict) else ''}]")
            elif isinstance(part, str):
                parts.append(part)
        return "\n".join(parts)
    if isinstance(content, dict):
        return str(content.get("text") or orjson.dumps(content).decode())
    return str(content)


def decode_arguments(args: Any) -> dict[str, Any]:
    """Tool arguments as a dict: objects as is, JSON object strings decoded, anything else
    (plain text such as an apply_patch envelope, a number, a list) kept under ``"input"``."""
    if isinstance(args, dict):
        return args
    if args is None:
        return {}
    if isinstance(args, str):
        s = args.strip()
        if not s:
            return {}
        try:
            v = orjson.loads(s)
        except orjson.JSONDecodeError:
            return {"input": args}
        return v if isinstance(v, dict) else {"input": v}
    return {"input": args}


def _final_metrics(fm: Any) -> FinalMetrics | None:
    if not isinstance(fm, dict):
        return None
    return FinalMetrics(
        prompt_tokens=_int(fm.get("total_prompt_tokens")),
        completion_tokens=_int(fm.get("total_completion_tokens")),
        cached_tokens=_int(fm.get("total_cached_tokens")),
        cost_usd=_float(fm.get("total_cost_usd")),
        total_steps=_int(fm.get("total_steps")),
        cache_write_tokens=_int(fm["extra"].get("total_cache_creation_input_tokens")) if isinstance(fm.get("extra"), dict) else None,
    )


def _parse_step(raw: dict, index: int, path: str, warnings: list[str]) -> Step:
    # Hot path (every step of every trial): plain type checks, no helper calls for the common case.
    get = raw.get
    step_id = get("step_id")
    if type(step_id) is not int:
        step_id = _int(step_id) or index + 1
    source = get("source")
    extra = get("extra")
    if type(extra) is not dict:
        extra = {}
    message = get("message")
    timestamp = get("timestamp")
    model_name = get("model_name")
    step = Step(
        step_id,
        source if type(source) is str else "agent",
        timestamp if type(timestamp) is str else None,
        message if type(message) is str else content_text(message),
        model_name if type(model_name) is str else None,
    )
    if get("is_copied_context"):
        step.is_copied_context = True
    if extra:
        step.extra = extra
    metrics = get("metrics")
    if type(metrics) is dict:
        mget = metrics.get
        v = mget("prompt_tokens")
        step.prompt_tokens = v if type(v) is int else _int(v)
        v = mget("completion_tokens")
        step.completion_tokens = v if type(v) is int else _int(v)
        v = mget("cached_tokens")
        step.cached_tokens = v if type(v) is int else _int(v)
        v = mget("cost_usd")
        step.cost_usd = v if type(v) is float else _float(v)
        # Producers that split one API response over several steps repeat its id; count it once.
        key = extra.get("message_id") or extra.get("request_id") if extra else None
        mextra = mget("extra")
        if type(mextra) is dict:
            if not key:
                key = mextra.get("message_id") or mextra.get("request_id")
            v = mextra.get("cache_creation_input_tokens")
            if v is not None:
                step.cache_write_tokens = v if type(v) is int else _int(v)
        if key:
            step.usage_key = str(key)
    calls = get("tool_calls")
    by_id: dict[str, ToolCall] = {}
    if calls and type(calls) is list:
        for c in calls:
            if type(c) is not dict:
                continue
            args = c.get("arguments")
            cid = c.get("tool_call_id")
            call = ToolCall(
                step_id,
                str(c.get("function_name") or c.get("name") or "unknown"),
                args if type(args) is dict else decode_arguments(args),
                None if cid is None else str(cid),
            )
            step.tool_calls.append(call)
            if call.call_id is not None:
                by_id[call.call_id] = call
    obs = get("observation")
    results = obs.get("results") if type(obs) is dict else None
    if results and type(results) is list:
        single = step.tool_calls[0] if len(step.tool_calls) == 1 and len(results) == 1 else None
        for r in results:
            if type(r) is not dict:
                continue
            content = r.get("content")
            text = content if type(content) is str else content_text(content)
            n = len(text)
            if n > HUGE_OUTPUT_CHARS:
                warnings.append(f"step {step_id}: observation of {n / 1e6:.0f} M characters truncated to {OUTPUT_KEEP_CHARS}")
            sid = r.get("source_call_id")
            # One call, one result, no id: terminus-2 and openhands without function calling.
            call = by_id.get(str(sid)) if sid is not None else single
            if call is not None:
                call.output = text if n <= OUTPUT_KEEP_CHARS else text[:OUTPUT_KEEP_CHARS]
                call.output_chars = n
                rextra = r.get("extra")
                call.is_error = result_is_error(call.name, text, rextra if type(rextra) is dict else None, r)
            else:
                step.observations.append(text[:OUTPUT_KEEP_CHARS])
    return step


def parse_trajectory(obj: Any, path: str = "<memory>", *, _depth: int = 0, _follow: bool = True) -> Trajectory:
    """Parse one ATIF document (already decoded JSON) into a :class:`Trajectory`.

    Subagent trajectories are parsed into ``Trajectory.subagents``; a continuation chain
    (``continued_trajectory_ref``) is followed and merged: steps appended without the
    ``is_copied_context`` ones, ``final_metrics`` taken from the last segment (they are cumulative).
    Raises :class:`InputError` when the document is not ATIF or has an unknown major version.
    """
    path = str(path)
    if not is_atif(obj):
        raise InputError(path, "trajectory", describe_non_atif(obj))
    version = obj["schema_version"]
    warnings: list[str] = []
    w = check_version(version, path)
    if w:
        warnings.append(w)
    agent = obj.get("agent") if isinstance(obj.get("agent"), dict) else {}
    raw_steps = obj.get("steps")
    if not isinstance(raw_steps, list):
        raise InputError(path, "trajectory", "ATIF trajectory without a steps list")
    traj = Trajectory(
        schema_version=version,
        agent_name=agent.get("name"),
        agent_version=agent.get("version"),
        model_name=agent.get("model_name"),
        session_id=obj.get("session_id"),
        final_metrics=_final_metrics(obj.get("final_metrics")),
        source_path=path,
        warnings=warnings,
        extra={"agent_extra": agent["extra"]} if isinstance(agent.get("extra"), dict) else {},
    )
    for i, raw in enumerate(raw_steps):
        if isinstance(raw, dict):
            traj.steps.append(_parse_step(raw, i, path, warnings))
    _dedupe_repeated_usage(traj.steps, traj.agent_name)
    if _depth < 8:
        _attach_subagents(traj, obj, raw_steps, path, _depth)
        if _follow:
            _follow_continuations(traj, obj, path, _depth)
    return traj


def _dedupe_repeated_usage(steps: list[Step], agent_name: str | None = None) -> None:
    """Mark agent steps that repeat the previous step's API-call usage (one call split into blocks).

    Harbor's claude-code converter emits one step per content block and copies the call's usage
    onto each, the output count as far as the response had streamed (2, then 139 tokens). For
    Claude Code trajectories, consecutive agent steps with the same non-zero prompt, cached and
    cache-write counts and no distinguishing id are one call: every call's prompt is the previous
    one's plus its answer, so two calls never share them. On two real CodeScaleBench trajectories
    (74 and 42 steps) this finds the calls whose cache writes sum exactly to the study's own count
    from the raw transcript. Other producers write one step per call, so equal counts there are
    distinct calls.
    """
    by_blocks = bool(agent_name) and "claude" in str(agent_name).lower()
    prev_key: str | None = None
    prev_usage: tuple | None = None
    for s in steps:
        if s.source != "agent" or s.prompt_tokens is None:
            prev_usage = None
            continue
        usage = (s.prompt_tokens, s.cached_tokens, s.cache_write_tokens)
        key = s.usage_key
        if key is None and by_blocks and prev_usage == usage and s.prompt_tokens:
            key = prev_key
        elif key is None:
            key = f"step-{s.step_id}"
        s.usage_key = prev_key = key
        prev_usage = usage


def _attach_subagents(traj: Trajectory, obj: dict, raw_steps: list, path: str, depth: int) -> None:
    embedded: dict[str, Any] = {}
    subs = obj.get("subagent_trajectories")
    if isinstance(subs, list):
        for sub in subs:
            if is_atif(sub):
                tid = sub.get("trajectory_id") or sub.get("session_id") or f"embedded-{len(embedded)}"
                embedded[str(tid)] = sub
    seen: set[str] = set()
    base = os.path.dirname(path)
    for raw in raw_steps:
        if not isinstance(raw, dict):
            continue
        obs = raw.get("observation")
        for r in (obs.get("results") or []) if isinstance(obs, dict) else []:
            refs = r.get("subagent_trajectory_ref") if isinstance(r, dict) else None
            if isinstance(refs, dict):
                refs = [refs]
            for ref in refs or []:
                if not isinstance(ref, dict):
                    continue
                tid, tpath = ref.get("trajectory_id"), ref.get("trajectory_path")
                sub: Trajectory | None = None
                if tid and str(tid) in embedded:
                    key = f"id:{tid}"
                    if key not in seen:
                        seen.add(key)
                        sub = parse_trajectory(embedded[str(tid)], f"{path}#{tid}", _depth=depth + 1)
                elif isinstance(tpath, str) and tpath:
                    target = _resolve_ref(path, tpath)
                    key = f"path:{target}"
                    if key in seen:
                        continue
                    seen.add(key)
                    if not _inside(base, target):
                        traj.warnings.append(f"subagent path {tpath!r} points outside the trajectory's folder; ignored")
                        continue
                    try:
                        sub = parse_trajectory(read_json(target, "trajectory"), target, _depth=depth + 1)
                    except InputError as exc:
                        traj.warnings.append(f"subagent {tpath!r} unreadable: {exc.error.message}")
                else:
                    traj.warnings.append(f"subagent reference without a resolvable trajectory ({ref.get('session_id') or tid})")
                if sub is not None:
                    # Where it was started: the metrics place its calls after this call (see metrics.call_order).
                    sid = r.get("source_call_id")
                    sub.parent_call_id = None if sid is None else str(sid)
                    sub.parent_step_id = _int(raw.get("step_id"))
                    traj.subagents.append(sub)
    for tid, raw_sub in embedded.items():
        if f"id:{tid}" not in seen:
            traj.subagents.append(parse_trajectory(raw_sub, f"{path}#{tid}", _depth=depth + 1))


def _follow_continuations(traj: Trajectory, obj: dict, path: str, depth: int) -> None:
    ref = obj.get("continued_trajectory_ref")
    visited = {os.path.abspath(path)}
    current_path = path
    while isinstance(ref, str) and ref:
        base = os.path.dirname(current_path)
        target = _resolve_ref(current_path, ref)
        if os.path.abspath(target) in visited:
            traj.warnings.append(f"continuation cycle at {ref!r}; stopped")
            return
        if not _inside(base, target):
            traj.warnings.append(f"continuation {ref!r} points outside the trajectory's folder; ignored")
            return
        visited.add(os.path.abspath(target))
        try:
            nxt_obj = read_json(target, "trajectory")
            nxt = parse_trajectory(nxt_obj, target, _depth=depth + 1, _follow=False)
        except InputError as exc:
            traj.warnings.append(f"continuation {ref!r} unreadable: {exc.error.message}")
            return
        traj.steps.extend(s for s in nxt.steps if not s.is_copied_context)
        traj.subagents.extend(nxt.subagents)
        traj.warnings.extend(nxt.warnings)
        if nxt.final_metrics is not None:
            traj.final_metrics = nxt.final_metrics  # cumulative over the whole chain
        traj.extra.setdefault("continuations", []).append(os.path.basename(target))
        current_path, ref = target, nxt_obj.get("continued_trajectory_ref")


def _resolve_ref(referrer: str, ref: str) -> str:
    """Path of a referenced trajectory file, relative to the referring file's folder.

    Harbor names the root ``trajectory.json`` and refers to ``trajectory.<part>.json``; copies
    renamed with a prefix (``hello-world.trajectory.json``) keep the prefix on their parts too.
    """
    base = os.path.dirname(referrer)
    target = os.path.normpath(os.path.join(base, ref))
    if not os.path.exists(target):
        name = os.path.basename(referrer)
        i = name.find("trajectory")
        if i > 0:
            alt = os.path.normpath(os.path.join(base, name[:i] + ref))
            if os.path.exists(alt):
                return alt
    return target


def _inside(base: str, target: str) -> bool:
    base_r = os.path.realpath(base)
    return os.path.realpath(target).startswith(base_r + os.sep) or os.path.realpath(target) == base_r


def read_trajectory(path: str | os.PathLike) -> Trajectory:
    """Read and parse an ATIF file (invalid UTF-8 is replaced, with a warning, rather than refused)."""
    notes: list[str] = []
    traj = parse_trajectory(loads_lenient(read_bytes(path, "trajectory"), path, "trajectory", notes), str(path))
    traj.warnings.extend(notes)
    return traj
