"""mcpbr results (``mcpbr run -o results.json``, or its ``incremental_results.jsonl``), imported as trials.

mcpbr runs each SWE-bench-style task once per run kind (``mcp`` and ``baseline``, or ``mcp_server_a``
and ``mcp_server_b`` in comparison mode) and writes per-run counters, not a trajectory (FORMATS.md §8).
One :class:`Trial` per task and run kind. Rules:

* ``profile`` = the run kind; in comparison mode the server's ``name`` from the metadata when both
  servers have distinct names (``unknown`` is mcpbr's placeholder and is ignored). ``repetition`` = 1,
  counting up if a task repeats in one file. ``run_id`` = ``metadata.timestamp`` (else the file stem).
  ``trial_path`` = ``<file>#<instance_id>/<kind>``.
* outcome: ``resolved`` -> reward 1.0 / 0.0, ``success`` = resolved. A run that ``error``-ed before the
  agent did anything (no iterations, no tool calls, no tokens; not a timeout) has no reward: mcpbr writes
  ``resolved: false`` for a Docker failure too, which would count an infrastructure error as an agent
  failure. A timeout keeps its ``resolved: false``. The error text goes to :attr:`Trial.exception`.
* carried metrics: ``tokens.input``/``tokens.output`` -> ``total_input_tokens``/``total_output_tokens``
  (both 0 = not reported). **mcpbr's input count is Claude's ``usage.input_tokens``, which excludes
  cache reads and writes**: it is far below the ATIF count (``metadata["input_tokens_exclude_cache"]``);
  compare it only with other mcpbr runs. No cached count exists. ``iterations`` (Claude's turns) ->
  ``total_steps``; ``tool_calls`` -> ``tool_calls_count``; ``tool_usage`` -> ``tool_distribution``
  (mcpbr counts every ``tool_use`` block, failed ones included); ``tool_failures`` (name -> count) summed
  -> ``tool_error_count``, carried only when present (older files and the README example have none);
  ``runtime_seconds`` -> ``elapsed_sec``; ``cost`` (mcpbr's own price table) -> ``total_cost_usd``;
  ``fail_to_pass`` + ``pass_to_pass`` -> ``tests_passed``/``tests_failed``/``tests_total``.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

from ..core.fileio import iter_jsonl, read_json
from ..core.trial import IngestError, InputError, Trial
from ._carried import as_float, as_int, one_line

STAGE = "import"
SOURCE_FORMAT = "mcpbr"
RUN_KINDS = ("mcp", "baseline", "mcp_server_a", "mcp_server_b")
_HEAD_BYTES = 64 * 1024
# mcpbr-only keys: a generic {"metadata": ..., "tasks": [...]} file is not enough.
_MARKERS = re.compile(r'"(agent_harness|mcp_server(_a|_b)?|instance_id|patch_generated|comparison_mode)"\s*:')


def is_mcpbr_results(path: str | os.PathLike) -> bool:
    """True for an mcpbr results file: a JSON object with ``metadata`` and ``tasks``/``summary`` and mcpbr keys, or its incremental JSONL.

    Only the first 64 KB are looked at, so that a truncated file is still claimed and then reported.
    """
    p = Path(path)
    try:
        if not p.is_file():
            return False
        with open(p, "rb") as fh:
            head = fh.read(_HEAD_BYTES).decode("utf-8", errors="replace").lstrip("\ufeff \t\r\n")
    except OSError:
        return False
    if p.suffix == ".jsonl":
        return bool(re.match(r'\{\s*"type"\s*:\s*"(metadata|task_result)"', head)) and bool(_MARKERS.search(head))
    if not head.startswith("{"):
        return False
    return bool(
        re.search(r'"metadata"\s*:\s*\{', head)
        and re.search(r'"(tasks|summary)"\s*:', head)
        and _MARKERS.search(head)
    )


def read_mcpbr_results(path: str | os.PathLike) -> tuple[list[Trial], list[IngestError]]:
    """Read one mcpbr results file: one :class:`Trial` per task and run kind, one :class:`IngestError` per bad file or record."""
    p = Path(path)
    errors: list[IngestError] = []
    try:
        meta, tasks = _load(p)
    except InputError as exc:
        return [], [exc.error]
    if not tasks:
        errors.append(IngestError(str(p), STAGE, "no task results in the file"))

    config = meta.get("config") if isinstance(meta.get("config"), dict) else {}
    profiles = _profiles(meta)
    run_id = str(meta.get("timestamp") or p.stem)
    seen: dict[tuple[str, str], int] = {}
    trials: list[Trial] = []
    for i, task in enumerate(tasks):
        where = f"tasks[{i}]"
        iid = task.get("instance_id") if isinstance(task, dict) else None
        if not isinstance(iid, str) or not iid:
            errors.append(IngestError(str(p), STAGE, f"{where}: no instance_id"))
            continue
        kinds = [k for k in RUN_KINDS if k in task and task[k] is not None]
        if not kinds:
            errors.append(IngestError(str(p), STAGE, f"{where} ({iid}): no {'/'.join(RUN_KINDS)} result"))
            continue
        for kind in kinds:
            run = task[kind]
            if not isinstance(run, dict):
                errors.append(IngestError(str(p), STAGE, f"{where} ({iid}): {kind} is a {type(run).__name__}, expected an object"))
                continue
            profile = profiles[kind]
            rep = seen.get((profile, iid), 0) + 1
            seen[(profile, iid)] = rep
            trial = _trial(run, kind, profile, iid, rep, run_id, p, meta, config)
            trials.append(trial)
            errors.extend(IngestError(str(p), STAGE, f"{where} ({iid}) {kind}: {w}", "warning") for w in trial.warnings)
    return trials, errors


def _load(p: Path) -> tuple[dict[str, Any], list[Any]]:
    """``(metadata, tasks)`` of a results JSON, or of an incremental JSONL (metadata line + task_result lines)."""
    if p.suffix == ".jsonl":
        meta: dict[str, Any] = {}
        tasks: list[Any] = []
        for _, line in iter_jsonl(p, STAGE):
            if not isinstance(line, dict):
                continue
            if line.get("type") == "metadata" and isinstance(line.get("data"), dict):
                meta = line["data"]
            elif line.get("type") == "task_result":
                tasks.append(line.get("data"))
        return meta, tasks
    obj = read_json(p, STAGE)
    if not isinstance(obj, dict):
        raise InputError(str(p), STAGE, f"expected a JSON object, got {type(obj).__name__}")
    if not isinstance(obj.get("tasks"), list):
        raise InputError(str(p), STAGE, "not an mcpbr results file: no tasks[] list")
    meta = obj.get("metadata") if isinstance(obj.get("metadata"), dict) else {}
    return meta, obj["tasks"]


def _profiles(meta: dict[str, Any]) -> dict[str, str]:
    """Run kind -> profile: the kind itself, or the comparison servers' distinct names."""
    out = {k: k for k in RUN_KINDS}
    names = []
    for kind in ("mcp_server_a", "mcp_server_b"):
        server = meta.get(kind) if isinstance(meta.get(kind), dict) else {}
        name = server.get("name")
        names.append(name if isinstance(name, str) and name.strip() and name != "unknown" else None)
    if all(names) and names[0] != names[1]:
        out["mcp_server_a"], out["mcp_server_b"] = names[0], names[1]
    return out


def _tests(run: dict[str, Any]) -> dict[str, int]:
    passed = total = 0
    found = False
    for key in ("fail_to_pass", "pass_to_pass"):
        block = run.get(key)
        if isinstance(block, dict):
            bp, bt = as_int(block.get("passed")), as_int(block.get("total"))
            if bp is not None and bt is not None and bp <= bt:
                passed, total, found = passed + bp, total + bt, True
    return {"tests_passed": passed, "tests_failed": total - passed, "tests_total": total} if found else {}


def _trial(run: dict[str, Any], kind: str, profile: str, iid: str, rep: int, run_id: str,
           p: Path, meta: dict[str, Any], config: dict[str, Any]) -> Trial:
    warnings: list[str] = []
    tokens = run.get("tokens") if isinstance(run.get("tokens"), dict) else {}
    tin, tout = as_int(tokens.get("input")), as_int(tokens.get("output"))
    iterations, tool_calls = as_int(run.get("iterations")), as_int(run.get("tool_calls"))
    error = run.get("error") if isinstance(run.get("error"), str) and run.get("error") else None
    timed_out = run.get("status") == "timeout" or (error or "").strip().lower() == "timeout"
    did_nothing = not any((tin, tout, iterations, tool_calls))

    resolved = run.get("resolved")
    if isinstance(resolved, bool):
        reward: float | None = 1.0 if resolved else 0.0
    else:
        reward = None
        if resolved is not None:
            warnings.append(f"resolved is {resolved!r}, expected true or false; no reward")
    if error and did_nothing and not timed_out and not resolved:
        reward = None  # the harness failed before the agent worked: an infrastructure error, not a failure

    carried: dict[str, Any] = {}
    if reward is not None:
        carried["success"] = reward == 1.0
        carried["reward"] = reward
    carried.update(_tests(run))
    if tin or tout:
        if tin is not None:
            carried["total_input_tokens"] = tin
        if tout is not None:
            carried["total_output_tokens"] = tout
    # mcpbr's error paths write 0 iterations and 0 calls whatever happened: unknown, not zero.
    if not (error and did_nothing):
        if iterations is not None:
            carried["total_steps"] = iterations
        if tool_calls is not None:
            carried["tool_calls_count"] = tool_calls
    usage = run.get("tool_usage")
    if isinstance(usage, dict):
        carried["tool_distribution"] = {str(k): v for k, v in usage.items() if as_int(v) is not None}
    failures = run.get("tool_failures")
    if isinstance(failures, dict):
        carried["tool_error_count"] = sum(as_int(v) or 0 for v in failures.values())
    runtime = as_float(run.get("runtime_seconds"))
    if runtime is not None and runtime >= 0:
        carried["elapsed_sec"] = runtime
    cost = as_float(run.get("cost"))
    if cost is not None and cost >= 0:
        carried["total_cost_usd"] = cost

    server = meta.get("mcp_server" if kind == "mcp" else kind) if kind != "baseline" else None
    metadata: dict[str, Any] = {
        "run_kind": kind,
        "model_name": config.get("model"),
        "provider": config.get("provider"),
        "agent_name": config.get("agent_harness"),
        "benchmark": config.get("benchmark"),
        "dataset": config.get("dataset"),
        "mcp_server": server if isinstance(server, dict) else None,
        "input_tokens_exclude_cache": True if (tin or tout) else None,
        "cost_source": "mcpbr pricing table" if cost is not None else None,
        "iterations": iterations,
        "patch_generated": run.get("patch_generated"),
        "patch_applied": run.get("patch_applied"),
        "resolved": resolved if isinstance(resolved, bool) else None,
        "error": one_line(error) if error else None,
        "eval_error": one_line(run["eval_error"]) if isinstance(run.get("eval_error"), str) and run["eval_error"] else None,
        "status": run.get("status"),
        "cache_hit": run.get("cache_hit"),
        "tool_failures": failures if isinstance(failures, dict) else None,
        "tool_errors": run.get("tool_errors") if isinstance(run.get("tool_errors"), dict) else None,
    }
    frag = f"{iid}/{kind}" + (f"/{rep}" if rep > 1 else "")
    return Trial(
        profile=profile,
        task_id=iid,
        repetition=rep,
        run_id=run_id,
        trial_path=f"{p}#{frag}",
        source_format=SOURCE_FORMAT,
        reward=reward,
        exception=one_line(error) if error else None,
        paths={"result": str(p)},
        metadata={k: v for k, v in metadata.items() if v is not None},
        carried_metrics=carried,
        warnings=warnings,
    )
