"""Seeded simulator of A/B/C agent runs: a latent metrics model and a writer of the run layout.

SIMULATED DATA — not findings. It serves two purposes: the embedded sample ``runs/sample/``
(realistic files for every reader and notebook) and the ground truth for testing the
statistics (known injected effects, and exchangeable profiles under :meth:`Effects.null`).

The latent model (:func:`simulate_metrics`) draws, for one seed, every per-trial quantity with
numpy in a fixed order; the file writer (:func:`simulate_runs`) writes trajectories, CTRF reports,
rewards and Harbor results from exactly those draws, so that metrics computed from the files
equal the latent ones where they overlap (tokens, cost to 1e-6 USD, success, elapsed time, tool
calls, MCP calls, exploration breadth; checked by ``tests/test_simulate.py`` through the real
ingest and Layer 1 metrics).

What the files contain, per trial (``<out>/<YYYY-MM-DD__HH-MM-SS>__<profile>/<task_id>/``):

- ``agent/trajectory.json``: ATIF-v1.6 shaped like Harbor's claude-code converter, but one agent
  step per API call so that ``final_metrics`` equal the step sums. Step 1 is the user's task
  instruction; agent steps carry Claude Code tools (Read, Grep, Glob, Edit, Write, Bash with
  ``cat``/``sed -n``/``sed -i``/``grep -rn``/``ls``/``pytest``/``git diff``, TodoWrite) and MCP tools
  (``mcp__codegraph__*``; ``mcp__codecanvas__canvas`` actions for ``codecanvas``). About 9 % of
  results are errors (``Error: ...`` content and ``extra.is_error``: an Edit whose string is not
  found, a failing test run, an unknown MCP symbol); some calls repeat the one before (loops),
  some re-edit a file (backtracks), and about one failed trial in ten with room for it runs the
  tests six more times in a row (``infinite_loop``). Prompt tokens grow along the trajectory.
- ``verifier/ctrf.json`` (pytest-json-ctrf as Harbor writes it), ``verifier/reward.txt``,
  ``result.json`` (Harbor TrialResult; the agent-timeout trial keeps reward 0.0, the
  infrastructure-error trial has neither trajectory nor verifier).
- ``codecanvas`` trials that opened the canvas: ``agent/sessions/codecanvas/state.json`` (evidence,
  claims, decisions, impact analyses, symbol files) and small PNGs drawn with Pillow.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import shutil
import tempfile
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image, ImageDraw, ImageFont

from ..core import outputs as files
from ..study import plan as plan_mod
from .model import (
    BASELINE,
    DEFAULT_PROFILES,
    FLOAT_DIGITS,
    REPO_MODULES,
    SIMULATOR,
    Effects,
    cost_usd,
    round_floats,
    simulate_metrics,
    task_ids,
    true_effects,
)

__all__ = ["ATIF_VERSION", "AGENT_NAME", "AGENT_VERSION", "MODEL", "APP", "NOTE", "simulate_runs"]


ATIF_VERSION = "ATIF-v1.6"


AGENT_NAME = "claude-code"


AGENT_VERSION = "2.0.37"


MODEL = "claude-sonnet-4-5-20250929"


APP = "/app"  # the container's working directory, as Claude Code sees it


NOTE = "SIMULATED DATA — not findings"


_PACKAGES = (
    "tinyhttp",
    "datapipe",
    "confmerge",
    "taskq",
    "pagekit",
    "schemax",
    "logroll",
    "graphkit",
    "cachebox",
    "clikit",
    "yamlite",
    "sqlsafe",
)


_MODULES = (
    "core",
    "utils",
    "parser",
    "io",
    "config",
    "cli",
    "models",
    "cache",
    "errors",
    "retry",
    "client",
    "server",
    "schema",
    "registry",
    "session",
    "validators",
    "formats",
    "pagination",
    "locks",
    "events",
)


_FUNCS = ("load", "parse", "validate", "render", "apply", "resolve", "flush", "merge", "normalize", "dispatch")


_WORDS = ("timeout", "encoding", "offset", "retries", "boundary", "cursor", "separator", "default", "ordering", "token")




@dataclass
class _Call:
    name: str
    arguments: dict[str, Any]
    content: str
    is_error: bool = False
    # What the canvas state records about this call (codecanvas profile only).
    meta: dict[str, Any] | None = None


def _child_rng(seed: int, *key: int) -> np.random.Generator:
    return np.random.default_rng(np.random.SeedSequence([int(seed), *key]))


def _pick(rng: np.random.Generator, seq: Any) -> Any:
    return seq[int(rng.integers(len(seq)))]


_ALNUM = np.array(list("ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz0123456789"))


def _token(rng: np.random.Generator, n: int) -> str:
    """A random alphanumeric id (tool-use ids, trial-name suffixes), drawn in one call."""
    return "".join(_ALNUM[rng.integers(0, len(_ALNUM), size=n)])


def _partition(total: int, weights: np.ndarray) -> list[int]:
    """Split an integer total by weights, exactly (largest remainder), so that parts sum to it."""
    w = np.asarray(weights, dtype=float)
    raw = total * w / w.sum()
    base = np.floor(raw).astype(np.int64)
    rest = int(total - base.sum())
    order = np.argsort(-(raw - base), kind="stable")
    base[order[:rest]] += 1
    return [int(x) for x in base]


@dataclass
class _Repo:
    """The fake repository of one task: a package, its modules and one public symbol per module."""

    task_id: str
    pkg: str
    modules: list[str]
    instruction: str

    def src(self, mod: str) -> str:
        return f"src/{self.pkg}/{mod}.py"

    def test(self, mod: str) -> str:
        return f"tests/test_{mod}.py"

    def files(self) -> list[str]:
        return [self.src(m) for m in self.modules] + [self.test(m) for m in self.modules]

    def symbol(self, path: str) -> str:
        mod = Path(path).stem.removeprefix("test_")
        fn = _FUNCS[sum(map(ord, mod)) % len(_FUNCS)]
        return f"{self.pkg}.{mod}.{fn}" if path.startswith("src/") else f"tests.test_{mod}.test_{fn}"


def _package(task_id: str) -> str:
    """The simulated library a task is about: one per task, the same in every profile and seed."""
    return _PACKAGES[int(hashlib.sha256(task_id.encode()).hexdigest(), 16) % len(_PACKAGES)]


def _repo(seed: int, t_idx: int, task_id: str) -> _Repo:
    # Task-level generator: the same repository for every profile and repetition of a task.
    rng = _child_rng(seed, 7, t_idx)
    pkg = _package(task_id)
    mods = [str(m) for m in rng.permutation(list(_MODULES))[:REPO_MODULES]]
    words = task_id.removeprefix("fix-").replace("-", " ")
    instruction = (
        f"The `{pkg}` library in /app has a bug: {words}. Find the cause in src/{pkg}/, fix it, "
        f"and make sure the test suite passes (`python -m pytest -q`). Do not modify the tests "
        f"unless they are wrong."
    )
    return _Repo(task_id, pkg, mods, instruction)


def _code_snippet(path: str, repo: _Repo, rng: np.random.Generator) -> str:
    mod = Path(path).stem
    sym = repo.symbol(path).rsplit(".", 1)[-1]
    word = _pick(rng, _WORDS)
    lines = [
        f"def {sym}(value, {word}=None):  # {mod}",
        f"    if {word} is None:",
        f"        {word} = DEFAULT_{word.upper()}",
        f"    return _{sym}_impl(value, {word})",
    ]
    first = int(rng.integers(1, 120))
    return "\n".join(f"{i:>6}\t{line}" for i, line in enumerate(lines, first))


_CODEGRAPH = (
    "mcp__codegraph__get_dependencies",
    "mcp__codegraph__search_code",
    "mcp__codegraph__list_entrypoints",
    "mcp__codegraph__show_call_graph_neighborhood",
)


_CANVAS = "mcp__codecanvas__canvas"


def _mcp_json(obj: Any) -> str:
    # Claude Code hands MCP results over as a JSON document encoded in the content string.
    return json.dumps(obj, sort_keys=True)


def _plan_calls(
    rng: np.random.Generator, repo: _Repo, profile: str, n_calls: int, n_mcp: int, breadth: int, success: bool
) -> tuple[list[_Call], list[str], list[str]]:
    """The ordered tool calls of one trial: exactly ``n_calls`` calls, ``n_mcp`` of them MCP, touching
    exactly ``breadth`` distinct files by Read/Edit/Write or shell (cat, sed). Returns (calls, read-only
    files, edited files)."""
    native = n_calls - n_mcp
    files = repo.files()
    n_src = len(repo.modules)
    n_test = min(breadth // 3, n_src)
    srcs = [files[i] for i in rng.permutation(n_src)[: breadth - n_test]]
    tests = [files[n_src + i] for i in rng.permutation(n_src)[:n_test]]
    if len(srcs) < breadth - n_test:  # more files than source modules: top up with tests
        extra = [f for f in files[n_src:] if f not in tests]
        tests += extra[: breadth - n_test - len(srcs)]
    touched = srcs + tests
    n_edit = 1 + int(rng.random() < 0.45) + int(rng.random() < 0.15)
    n_edit = max(0, min(n_edit, breadth, native - breadth - 1))
    edited = touched[:n_edit]
    read_only = touched[n_edit:]
    slack = native - breadth - n_edit - 1
    # A runaway loop (the same test run 6 more times) in a few failed trials: the infinite_loop flag.
    runaway = not success and slack >= 10 and rng.random() < 0.12
    slack -= 6 if runaway else 0
    grep_word = _pick(rng, _WORDS)

    def abs_(p: str) -> str:
        return f"{APP}/{p}"

    def read(p: str) -> _Call:
        u = rng.random()
        if u < 0.12:
            return _Call(
                "Bash", {"command": f"cat {abs_(p)}", "description": f"Show {Path(p).name}"}, _code_snippet(p, repo, rng).replace("\t", " ")
            )
        if u < 0.20:
            return _Call(
                "Bash",
                {"command": f"sed -n '1,80p' {abs_(p)}", "description": f"Show the start of {Path(p).name}"},
                _code_snippet(p, repo, rng).replace("\t", " "),
            )
        return _Call("Read", {"file_path": abs_(p)}, _code_snippet(p, repo, rng))

    def edit(p: str, again: bool = False) -> _Call:
        word = _pick(rng, _WORDS)
        if rng.random() < 0.12:
            return _Call(
                "Edit",
                {"file_path": abs_(p), "old_string": f"if {word} is None:", "new_string": f"if {word} is None or {word} == '':"},
                f"Error: String to replace not found in file.\nString: if {word} is None:",
                True,
            )
        if p.startswith("tests/") and not again and rng.random() < 0.5:
            sym = repo.symbol(p).rsplit(".", 1)[-1]
            return _Call(
                "Write",
                {"file_path": abs_(p), "content": f"def {sym}_{word}():\n    assert True\n"},
                f"File created successfully at: {abs_(p)}",
            )
        if rng.random() < 0.1:
            return _Call(
                "Bash",
                {
                    "command": f"sed -i 's/{word} = None/{word} = DEFAULT_{word.upper()}/' {abs_(p)}",
                    "description": f"Patch the {word} default",
                },
                "",
            )
        return _Call(
            "Edit",
            {
                "file_path": abs_(p),
                "old_string": f"    return _impl(value, {word})",
                "new_string": f"    {word} = _coerce({word})\n    return _impl(value, {word})",
            },
            f"The file {abs_(p)} has been updated.",
        )

    def pytest_call(passing: bool) -> _Call:
        target = repo.test(Path(edited[0]).stem) if edited and edited[0].startswith("src/") else "tests/"
        cmd = _pick(rng, (f"cd {APP} && python -m pytest -q {target}", f"python -m pytest -q {target}", "python -m pytest -q -x"))
        if passing:
            n = int(rng.integers(4, 30))
            return _Call(
                "Bash", {"command": cmd, "description": "Run the tests"}, f"{'.' * min(n, 20)}\n{n} passed in {rng.uniform(0.2, 3):.2f}s"
            )
        sym = repo.symbol(edited[0] if edited else touched[0]).rsplit(".", 1)[-1]
        return _Call(
            "Bash",
            {"command": cmd, "description": "Run the tests"},
            f"Error: Exit code 1\n..F.\nFAILED {target.rstrip('/')}::test_{sym} - AssertionError: "
            f"expected {grep_word} to be preserved\n1 failed, 3 passed in {rng.uniform(0.2, 3):.2f}s",
            True,
        )

    def search() -> _Call:
        u = rng.random()
        word = _pick(rng, _WORDS)
        if u < 0.45:
            hits = "\n".join(f"{abs_(f)}:{int(rng.integers(5, 200))}:    {word} = None" for f in touched[:2])
            return _Call("Grep", {"pattern": word, "path": f"{APP}/src", "output_mode": "content", "-n": True}, hits or "No matches found")
        if u < 0.65:
            pattern = _pick(rng, (f"src/{repo.pkg}/**/*.py", "tests/**/*.py", f"**/*{word[:4]}*"))
            return _Call("Glob", {"pattern": pattern}, "\n".join(abs_(f) for f in files[:4]))
        if u < 0.85:
            return _Call(
                "Bash",
                {"command": f'grep -rn "{word}" {APP}/src', "description": f"Find {word}"},
                f"{abs_(touched[0])}:12:    {word} = None",
            )
        return _Call(
            "Bash",
            {"command": f"ls {APP}/src/{repo.pkg}", "description": "List the package"},
            "\n".join(f"{m}.py" for m in repo.modules[:8]),
        )

    # Base actions: every touched file once (edited files are read first), one test run.
    explore: list[_Call] = [read(p) for p in touched]
    rng.shuffle(explore)  # type: ignore[arg-type]
    fix: list[_Call] = [edit(p) for p in edited]
    n_todo = 0
    for _ in range(slack):
        u = rng.random()
        if u < 0.39:
            explore.insert(int(rng.integers(len(explore) + 1)), search())
        elif u < 0.48:
            explore.append(read(_pick(rng, touched)))
        elif u < 0.62 and edited:
            fix.insert(int(rng.integers(len(fix) + 1)), pytest_call(False))
        elif u < 0.76 and edited:
            fix.append(edit(_pick(rng, edited), again=True))  # a backtrack: re-edit of an edited file
        elif u < 0.84:
            # The first todo list opens the trial; later ones tick items off while fixing.
            n_todo += 1
            todo = _Call(
                "TodoWrite",
                {
                    "todos": [
                        {
                            "content": f"Reproduce the {grep_word} bug",
                            "status": "in_progress" if n_todo == 1 else "completed",
                            "activeForm": "Reproducing the bug",
                        },
                        {
                            "content": f"Fix and run the tests (pass {n_todo})",
                            "status": "pending" if n_todo == 1 else "in_progress",
                            "activeForm": "Fixing",
                        },
                    ]
                },
                "Todos have been modified successfully. Ensure that you continue to use the todo list to track your progress.",
            )
            if n_todo == 1:
                explore.insert(0, todo)
            else:
                fix.insert(int(rng.integers(len(fix) + 1)), todo)
        elif u < 0.95:
            fix.append(
                _Call(
                    "Bash",
                    {"command": "git diff --stat", "description": "Review the change"},
                    f" {edited[0] if edited else touched[0]} | 3 ++-\n 1 file changed, 2 insertions(+), 1 deletion(-)",
                )
            )
        else:
            explore.append(None)  # type: ignore[arg-type]  # placeholder: a loop (repeat of the call before)
    final_test = pytest_call(success or rng.random() < 0.5)
    seq = explore + fix + [final_test]
    # Loops: a call identical to the one just before it.
    out: list[_Call] = []
    for c in seq:
        if c is None:
            c = out[-1] if out else search()
        out.append(c)
    if runaway:
        out += [final_test] * 6
    out = _with_mcp(rng, repo, profile, out, n_mcp, edited)
    assert len(out) == n_calls, (len(out), n_calls)
    return out, read_only, edited


def _is_edit(c: _Call) -> bool:
    return c.name in ("Edit", "Write") or (c.name == "Bash" and "sed -i" in c.arguments.get("command", ""))


def _with_mcp(rng: np.random.Generator, repo: _Repo, profile: str, calls: list[_Call], n_mcp: int, edited: list[str]) -> list[_Call]:
    """Insert ``n_mcp`` MCP calls where an agent would make them (set-up first, analysis while exploring,
    canvas decisions before the first edit, the board after the last)."""
    if n_mcp <= 0:
        return calls
    edit_pos = [i for i, c in enumerate(calls) if _is_edit(c)]
    first_edit = edit_pos[0] if edit_pos else len(calls) - 1
    last_edit = edit_pos[-1] + 1 if edit_pos else len(calls) - 1
    src_edited = [p for p in edited if p.startswith("src/")] or edited
    others = [f for f in repo.files() if f.startswith("src/") and f not in edited]

    def graph_call() -> _Call:
        name = _pick(rng, _CODEGRAPH)
        sym = repo.symbol(_pick(rng, src_edited))
        if rng.random() < 0.05:
            return _Call(name, {"symbol": sym + "_v2"}, f"Error: symbol '{sym}_v2' not found in the index", True)
        neigh = [repo.symbol(_pick(rng, others)) for _ in range(2)]
        if name.endswith("search_code"):
            return _Call(
                name,
                {"query": sym.rsplit(".", 1)[-1], "limit": 5},
                _mcp_json({"results": [{"symbol": s, "file": repo.src(s.split(".")[1])} for s in [sym, *neigh]]}),
            )
        if name.endswith("list_entrypoints"):
            return _Call(name, {}, _mcp_json({"entrypoints": [f"{repo.pkg}.cli.main", f"{repo.pkg}.core.run"]}))
        return _Call(name, {"symbol": sym, "depth": 1}, _mcp_json({"symbol": sym, "callers": neigh[:1], "callees": neigh[1:]}))

    early: list[_Call] = []  # before exploring
    explore: list[_Call] = []  # among the exploration calls
    decide: list[_Call] = []  # just before the first edit
    late: list[_Call] = []  # after the last edit
    if profile == "codecanvas":
        plan = ["init", "impact", "claim", "impact", "decide", "mark", "skip"]
        n_canvas = min(n_mcp, len(plan) + 1)
        kinds = plan[: n_canvas - 1] + ["board"] if n_canvas >= 3 else plan[:n_canvas]
        outside = rng.random() < 0.25 and len(edited) > 1  # one edited file left outside every blast radius
        n_impact = 0
        for kind in kinds:
            if kind == "init":
                early.append(
                    _Call(
                        _CANVAS,
                        {"action": "init", "repo_path": APP},
                        _mcp_json({"ok": True, "symbols": len(repo.modules) * 9, "image": "architecture.png"}),
                        meta={"kind": "init"},
                    )
                )
            elif kind == "impact":
                n_impact += 1
                # First the edited files, then a neighbour the agent suspects.
                target_file = src_edited[n_impact - 1] if n_impact <= len(src_edited) else _pick(rng, others)
                radius = [p for p in edited if p != target_file and not (outside and p == edited[-1])]
                radius += [others[int(i)] for i in rng.permutation(len(others))[: int(rng.integers(1, 4))]]
                target, affected = repo.symbol(target_file), [repo.symbol(p) for p in radius]
                explore.append(
                    _Call(
                        _CANVAS,
                        {"action": "impact", "symbol": target},
                        _mcp_json({"analysis_id": f"A{n_impact}", "affected": affected, "image": f"impact_A{n_impact}.png"}),
                        meta={
                            "kind": "impact",
                            "id": f"A{n_impact}",
                            "target": target,
                            "affected": affected,
                            "files": {s: p for s, p in zip([target, *affected], [target_file, *radius], strict=True)},
                        },
                    )
                )
            elif kind == "claim":
                sym = repo.symbol(src_edited[0])
                explore.append(
                    _Call(
                        _CANVAS,
                        {"action": "claim", "kind": "hypothesis", "text": f"The bug is in {sym}: the default is applied too late"},
                        _mcp_json({"claim_id": "C1"}),
                        meta={"kind": "claim", "symbol": sym},
                    )
                )
            elif kind == "decide":
                syms = [repo.symbol(p) for p in src_edited]
                decide.append(
                    _Call(
                        _CANVAS,
                        {"action": "decide", "kind": "plan", "text": f"Fix {syms[0]} and re-run its tests", "symbol_ids": syms},
                        _mcp_json({"decision_id": "D1"}),
                        meta={"kind": "decide", "symbols": syms},
                    )
                )
            elif kind == "mark":
                sym = repo.symbol(src_edited[0])
                decide.append(
                    _Call(
                        _CANVAS,
                        {"action": "mark", "symbol": sym, "status": "addressed"},
                        _mcp_json({"ok": True}),
                        meta={"kind": "mark", "symbol": sym},
                    )
                )
            elif kind == "skip":
                sym = repo.symbol(_pick(rng, others))
                decide.append(
                    _Call(
                        _CANVAS,
                        {"action": "skip", "symbol": sym, "reason": "only reads the value"},
                        _mcp_json({"ok": True}),
                        meta={"kind": "skip", "symbol": sym},
                    )
                )
            else:
                late.append(
                    _Call(_CANVAS, {"action": "board"}, _mcp_json({"image": "board.png", "open_claims": 0}), meta={"kind": "board"})
                )
        rest = n_mcp - len(kinds)
    else:
        early.append(
            _Call(
                "mcp__codegraph__init_repository",
                {"path": APP},
                _mcp_json({"indexed_files": len(repo.files()), "symbols": len(repo.modules) * 9, "status": "ok"}),
            )
        )
        rest = n_mcp - 1
    explore += [graph_call() for _ in range(rest)]
    out = list(early)
    # Spread exploration-time MCP calls over the calls before the first edit, keeping their order.
    slots = sorted(int(x) for x in rng.integers(0, first_edit + 1, size=len(explore)))
    j = 0
    for i, c in enumerate(calls):
        while j < len(explore) and slots[j] == i:
            out.append(explore[j])
            j += 1
        if i == first_edit:
            out += decide
        if i == last_edit:
            out += late
        out.append(c)
    out += explore[j:]
    if last_edit >= len(calls):
        out += late
    return out


_EPOCH = datetime(2026, 1, 1, tzinfo=UTC)


def _iso_ms(ms: int) -> str:
    """ATIF timestamp: UTC with milliseconds and Z."""
    t = _EPOCH + timedelta(milliseconds=ms)
    return t.strftime("%Y-%m-%dT%H:%M:%S.") + f"{t.microsecond // 1000:03d}Z"


def _iso_us(ms: int, z: bool = True) -> str:
    """Harbor timestamp: microseconds, Z for trial times, naive for exception times (as Harbor writes them)."""
    t = _EPOCH + timedelta(milliseconds=ms)
    return t.strftime("%Y-%m-%dT%H:%M:%S.%f") + ("Z" if z else "")


_SAY = {
    "Read": "Let me look at {f}.",
    "Grep": "Let me search for where this is handled.",
    "Glob": "Let me list the package files.",
    "Edit": "I'll fix {f}.",
    "Write": "I'll add a regression test in {f}.",
    "TodoWrite": "Let me plan the work.",
}


def _message(c: _Call) -> str:
    f = Path(str(c.arguments.get("file_path", ""))).name
    if c.name in _SAY:
        return _SAY[c.name].format(f=f)
    if c.name == "Bash":
        cmd = c.arguments.get("command", "")
        return "Let me run the tests." if "pytest" in cmd else ("" if "cat " in cmd else "Let me check.")
    if c.name == _CANVAS:
        return {
            "init": "Let me open the code canvas.",
            "impact": "Let me check the blast radius of this change.",
            "board": "Let me review the evidence board.",
        }.get(c.arguments.get("action"), "")
    return "Let me query the code graph."


def _trajectory(
    rng: np.random.Generator,
    repo: _Repo,
    calls: list[_Call],
    row: Any,
    t_agent0: int,
    elapsed_ms: int,
    session_id: str,
    success: bool,
    eff: Effects,
) -> tuple[dict[str, Any], list[tuple[int, _Call]]]:
    """ATIF-v1.6 as Harbor's claude-code converter writes it, one agent step per API call (usage counted once)."""
    groups: list[list[_Call]] = []
    i = 0
    while i < len(calls):
        c = calls[i]
        if (
            i + 1 < len(calls)
            and c.name in ("Read", "Grep", "Glob")
            and calls[i + 1].name in ("Read", "Grep", "Glob")
            and calls[i + 1] is not c
            and rng.random() < 0.3
        ):
            groups.append([c, calls[i + 1]])
            i += 2
        else:
            groups.append([c])
            i += 1
    timed_out = bool(row.agent_timeout)
    if not timed_out:
        groups.append([])  # the closing answer, no tool call
    k = len(groups)
    w = 1.0 + 0.12 * np.arange(k)  # the context grows with every turn
    prompt = _partition(int(row.total_input_tokens), w)
    cached = _partition(int(row.total_cached_tokens), w)
    completion = _partition(int(row.total_output_tokens), rng.uniform(0.5, 1.5, size=k))
    for j in range(k):  # cached tokens are part of the prompt (ATIF): move any excess one step on
        if cached[j] > prompt[j]:
            spill = cached[j] - prompt[j]
            cached[j] -= spill
            cached[(j + 1) % k] += spill
    assert all(c <= p for c, p in zip(cached, prompt, strict=True))
    # Timestamps: user step at start, agent steps spread over the agent's execution time.
    cuts = np.sort(rng.uniform(0.02, 1.0, size=k))
    times = [t_agent0 + int(round(x * (elapsed_ms - 50))) for x in cuts]
    steps: list[dict[str, Any]] = [{"step_id": 1, "timestamp": _iso_ms(t_agent0), "source": "user", "message": repo.instruction}]
    placed: list[tuple[int, _Call]] = []
    cost_total = 0.0
    for j, grp in enumerate(groups):
        sid = j + 2
        # Rounded to 1e-8 USD to keep files small; the totals then differ from the latent cost by < 1e-6.
        cost = round(float(cost_usd(prompt[j], cached[j], completion[j], eff)), 8)
        cost_total += cost
        step: dict[str, Any] = {"step_id": sid, "timestamp": _iso_ms(times[j]), "source": "agent", "model_name": MODEL}
        if grp:
            step["message"] = _message(grp[0])
            tcs, results = [], []
            for c in grp:
                call_id = "toolu_01" + _token(rng, 22)
                tcs.append({"tool_call_id": call_id, "function_name": c.name, "arguments": c.arguments})
                res: dict[str, Any] = {"source_call_id": call_id, "content": c.content}
                if c.is_error:
                    res["extra"] = {"is_error": True}
                results.append(res)
                placed.append((sid, c))
            step["tool_calls"] = tcs
            step["observation"] = {"results": results}
            stop = "tool_use"
        else:
            edited = sorted({Path(str(c.arguments.get("file_path", ""))).name for c in calls if c.name in ("Edit", "Write")})
            where = ", ".join(edited) or "the package"
            step["message"] = (
                f"I fixed the bug in {where}; the tests pass."
                if success
                else f"I changed {where}, but I could not confirm that every case is handled."
            )
            stop = "end_turn"
        step["metrics"] = {"prompt_tokens": prompt[j], "completion_tokens": completion[j], "cached_tokens": cached[j], "cost_usd": cost}
        step["extra"] = {"is_sidechain": False, "stop_reason": stop}
        steps.append(step)
    traj = {
        "schema_version": ATIF_VERSION,
        "session_id": session_id,
        "agent": {"name": AGENT_NAME, "version": AGENT_VERSION, "model_name": MODEL, "extra": {"cwds": [APP], "git_branches": ["HEAD"]}},
        "steps": steps,
        "final_metrics": {
            "total_prompt_tokens": int(row.total_input_tokens),
            "total_completion_tokens": int(row.total_output_tokens),
            "total_cached_tokens": int(row.total_cached_tokens),
            "total_cost_usd": round(cost_total, 8),
            "total_steps": len(steps),
        },
    }
    return traj, placed


def _variant_path(rng: np.random.Generator, rel: str) -> str:
    # CodeCanvas records paths as the agent typed them: sometimes "./x" or "/app/x" for the same file.
    u = rng.random()
    return f"./{rel}" if u < 0.15 else (f"{APP}/{rel}" if u < 0.25 else rel)


def _canvas_state(rng: np.random.Generator, repo: _Repo, placed: list[tuple[int, _Call]], edited: list[str]) -> dict[str, Any] | None:
    """CodeCanvas ``state.json`` (version 1) from the canvas calls of a trial; None when it never opened the canvas."""
    if not any(c.meta and c.meta["kind"] == "init" for _, c in placed):
        return None
    symbol_files: dict[str, str] = {}
    evidence: list[dict[str, Any]] = []
    claims: list[dict[str, Any]] = []
    decisions: list[dict[str, Any]] = []
    analyses: list[dict[str, Any]] = []
    skipped: set[str] = set()
    edited_syms = {repo.symbol(p): p for p in edited}
    opened = False
    n_reads = n_tests = 0

    def sym(s: str, rel: str) -> str:
        symbol_files.setdefault(s, _variant_path(rng, rel))
        return s

    def ev(kind: str, text: str, step: int, png: str | None = None) -> str:
        e: dict[str, Any] = {"id": f"E{len(evidence) + 1}", "kind": kind, "text": text, "step": step}
        if png:
            e["png_path"] = png
        evidence.append(e)
        return e["id"]

    for step, c in placed:
        kind = c.meta["kind"] if c.meta else None
        if kind == "init":
            opened = True
            continue
        if not opened:
            continue
        if kind == "impact":
            m = c.meta
            for s, p in m["files"].items():
                sym(s, p)
            ev("impact", f"{m['target']} reaches {len(m['affected'])} symbols", step, f"impact_{m['id']}.png")
            analyses.append(
                {
                    "id": m["id"],
                    "target": m["target"],
                    "affected": list(m["affected"]),
                    "addressed": [s for s in m["affected"] if s in edited_syms],
                    "skipped": [],
                    "png_path": f"impact_{m['id']}.png",
                }
            )
        elif kind == "claim":
            claims.append(
                {
                    "id": f"C{len(claims) + 1}",
                    "kind": "hypothesis",
                    "text": c.arguments["text"],
                    "evidence_ids": [e["id"] for e in evidence],
                }
            )
        elif kind == "decide":
            decisions.append(
                {
                    "id": f"D{len(decisions) + 1}",
                    "kind": "plan",
                    "text": c.arguments["text"],
                    "symbol_ids": [sym(s, edited_syms.get(s, repo.src(s.split(".")[1]))) for s in c.meta["symbols"]],
                    "claim_ids": [cl["id"] for cl in claims],
                }
            )
        elif kind in ("mark", "skip"):
            s = c.meta["symbol"]
            sym(s, edited_syms.get(s, repo.src(s.split(".")[1])))
            if kind == "skip":
                skipped.add(s)
            decisions.append(
                {
                    "id": f"D{len(decisions) + 1}",
                    "kind": kind,
                    "text": c.arguments.get("reason") or f"{s} {c.arguments.get('status', 'addressed')}",
                    "symbol_ids": [s],
                    "claim_ids": [],
                }
            )
        elif c.name == "Read" and n_reads < 2:
            n_reads += 1
            ev("read", f"read {Path(c.arguments['file_path']).name}", step)
        elif c.name == "Grep" and not any(e["kind"] == "search" for e in evidence):
            ev("search", f"grep {c.arguments['pattern']}", step)
        elif c.name == "Bash" and "pytest" in c.arguments.get("command", "") and n_tests < 2:
            n_tests += 1
            eid = ev("test", c.content.splitlines()[-1][:80], step)
            if not c.is_error and claims:
                claims.append(
                    {"id": f"C{len(claims) + 1}", "kind": "finding", "text": "the fix holds under the tests", "evidence_ids": [eid]}
                )
        elif _is_edit(c) and claims:
            p = str(c.arguments.get("file_path", "")).removeprefix(APP + "/")
            if p in edited and not any(d["kind"] == "edit" and d["symbol_ids"] == [repo.symbol(p)] for d in decisions):
                decisions.append(
                    {
                        "id": f"D{len(decisions) + 1}",
                        "kind": "edit",
                        "text": f"edit {Path(p).name}",
                        "symbol_ids": [sym(repo.symbol(p), p)],
                        "claim_ids": [claims[0]["id"]],
                    }
                )
    for a in analyses:
        a["skipped"] = [s for s in a["affected"] if s in skipped]
    images = {"architecture": "architecture.png"}
    if any(c.meta and c.meta["kind"] == "board" for _, c in placed):
        images["board"] = "board.png"
    return {
        "version": 1,
        "symbol_files": dict(sorted(symbol_files.items())),
        "evidence": evidence,
        "claims": claims,
        "decisions": decisions,
        "analyses": analyses,
        "images": images,
    }


def _png(draw_fn: Any, size: tuple[int, int] = (320, 200)) -> bytes:
    """A small diagram drawn straight into a palette image (a few KB, no metadata, fast)."""
    img = Image.new("P", size, "white")
    d = ImageDraw.Draw(img)
    draw_fn(d, ImageFont.load_default_imagefont())  # bitmap font: identical bytes on every machine
    buf = io.BytesIO()
    img.save(buf, format="PNG")
    return buf.getvalue()


def _box(d: Any, font: Any, xy: tuple[int, int], label: str, fill: str) -> None:
    x, y = xy
    d.rectangle([x, y, x + 92, y + 22], fill=fill, outline="black")
    d.text((x + 4, y + 6), label[:14], fill="black", font=font)


def _architecture_png(repo: _Repo) -> bytes:
    mods = repo.modules[:8]

    def draw(d: Any, font: Any) -> None:
        d.text((6, 4), f"{repo.pkg} (SIMULATED)", fill="black", font=font)
        pos = [(10 + (i % 3) * 104, 24 + (i // 3) * 58) for i in range(len(mods))]
        for i in range(1, len(mods)):
            a, b = pos[i - 1], pos[i]
            d.line([a[0] + 46, a[1] + 22, b[0] + 46, b[1]], fill="gray")
        for p, m in zip(pos, mods, strict=True):
            _box(d, font, p, m, "#cfe2ff")

    return _png(draw)


def _impact_png(analysis: dict[str, Any]) -> bytes:
    def draw(d: Any, font: Any) -> None:
        d.text((6, 4), f"impact {analysis['id']} (SIMULATED)", fill="black", font=font)
        centre = (114, 90)
        for i, s in enumerate(analysis["affected"][:6]):
            p = (10 + (i % 3) * 104, 30 if i < 3 else 150)
            d.line([centre[0] + 46, centre[1] + 11, p[0] + 46, p[1] + 11], fill="#d08000")
            _box(d, font, p, s.split(".", 1)[-1], "#ffe0b0" if s not in analysis["addressed"] else "#c8f0c8")
        _box(d, font, centre, analysis["target"].split(".", 1)[-1], "#ff9090")

    return _png(draw)


def _board_png(state: dict[str, Any]) -> bytes:
    cols = [("evidence", state["evidence"]), ("claims", state["claims"]), ("decisions", state["decisions"])]

    def draw(d: Any, font: Any) -> None:
        d.text((8, 188), "evidence board (SIMULATED)", fill="black", font=font)
        for i, (title, items) in enumerate(cols):
            x = 8 + i * 104
            d.text((x, 4), title, fill="black", font=font)
            for j, it in enumerate(items[:7]):
                _box(d, font, (x, 18 + j * 24), f"{it['id']} {it['kind']}", "#fff6a0")

    return _png(draw)


def _ctrf(rng: np.random.Generator, repo: _Repo, task_rng_seed: tuple[int, int], success: bool, start_ms: int) -> dict[str, Any]:
    """pytest-json-ctrf report as Harbor verifiers write it: no reportFormat, float seconds, file_path, raw_status."""
    trng = _child_rng(*task_rng_seed)  # the task's test list is the same in every trial
    n = int(trng.integers(3, 9))
    names = [f"test_outputs.py::test_{_pick(trng, _WORDS)}_{repo.modules[i % len(repo.modules)]}" for i in range(n)]
    n_failed = 0 if success else int(rng.integers(1, n + 1))
    failed = set(int(i) for i in rng.permutation(n)[:n_failed])
    t = start_ms / 1000.0 + 1_767_225_600.0  # _EPOCH as a Unix time
    start = t
    tests = []
    for i, name in enumerate(names):
        dur = float(rng.uniform(0.0005, 0.8))
        test: dict[str, Any] = {
            "name": name,
            "status": "failed" if i in failed else "passed",
            "duration": round(dur, 6),
            "start": round(t, 6),
            "stop": round(t + dur, 6),
            "retries": 0,
            "file_path": "test_outputs.py",
        }
        if i in failed:
            word = name.split("::test_")[1].split("_")[0]
            test["raw_status"] = "call_failed"
            test["message"] = f"AssertionError: {word} not handled"
            test["trace"] = (
                f"def {name.split('::')[1]}():\n>       assert result.{word} == expected.{word}\nE       AssertionError: {word} not handled"
            )
        tests.append(test)
        t += dur + 0.001
    summary = {
        "tests": n,
        "passed": n - n_failed,
        "failed": n_failed,
        "skipped": 0,
        "pending": 0,
        "other": 0,
        "start": round(start, 6),
        "stop": round(t, 6),
    }
    return {"results": {"tool": {"name": "pytest", "version": "8.4.1"}, "summary": summary, "tests": tests}}


def _profile_servers(profile: str) -> list[dict[str, Any]]:
    servers = {"codegraph": ["codegraph"], "codecanvas": ["codegraph", "codecanvas"]}.get(profile, [])
    return [{"name": s, "transport": "stdio", "command": f"{s}-mcp"} for s in servers]


def _run_start_ms(seed: int, p_idx: int, r_idx: int, n_profiles: int, n_tasks: int) -> int:
    # Fake but fixed clock: a start day derived from the seed, runs interleaved rep by rep.
    day = int(seed) % 300
    spacing = n_tasks * 2_400_000 + 3_600_000
    return (day * 86_400 + 9 * 3600) * 1000 + (r_idx * n_profiles + p_idx) * spacing


def _dumps(obj: Any, compact: bool = False, digits: int = FLOAT_DIGITS) -> bytes:
    # Sorted keys keep the sample byte-reproducible and diffable; trajectories are written compact
    # (Harbor indents them) to keep the committed sample small.
    obj = round_floats(obj, digits)
    if compact:
        return json.dumps(obj, separators=(",", ":"), sort_keys=True, ensure_ascii=False).encode("utf-8") + b"\n"
    return json.dumps(obj, indent=2, sort_keys=True, ensure_ascii=False).encode("utf-8") + b"\n"


def _write_trial(
    root: Path, seed: int, eff: Effects, row: Any, key: tuple[int, int, int], repo: _Repo, run_id: str, run_ms: int, n_tasks: int
) -> None:
    p_idx, t_idx, r_idx = key
    rng = _child_rng(seed, 11, p_idx, t_idx, r_idx)
    profile, task = str(row.profile), str(row.task_id)
    tdir = root / run_id / task
    tdir.mkdir(parents=True)
    elapsed_ms = int(round(float(row.elapsed_sec) * 1000))
    start = run_ms + t_idx * 2_400_000 + int(rng.integers(0, 60_000))
    env_end = start + 30 + int(rng.integers(6_000, 20_000))
    agent0 = env_end + int(rng.integers(4_000, 15_000))
    agent1 = agent0 + elapsed_ms
    ver0 = agent1 + int(rng.integers(300, 1_000))
    ver1 = ver0 + int(rng.integers(1_000, 8_000))
    finish = ver1 + int(rng.integers(200, 1_000))
    trial_name = f"{task[:32]}__" + _token(rng, 7)
    result: dict[str, Any] = {
        "id": str(uuid.UUID(bytes=rng.bytes(16), version=4)),
        "task_name": task,
        "trial_name": trial_name,
        "task_id": {"path": f"tasks/{task}"},
        "source": "simulated",
        "task_checksum": hashlib.sha256(task.encode()).hexdigest(),
        "config": {
            "trial_name": trial_name,
            "job_id": run_id,
            "timeout_multiplier": 1.0,
            "agent": {
                "name": AGENT_NAME,
                "model_name": f"anthropic/{MODEL}",
                "kwargs": {},
                "mcp_servers": _profile_servers(profile),
                "override_timeout_sec": eff.agent_timeout_sec,
            },
            "environment": {"type": "docker"},
            "simulated": True,
        },
        "agent_info": {"name": AGENT_NAME, "version": AGENT_VERSION, "model_info": {"name": MODEL, "provider": "anthropic"}},
        "started_at": _iso_us(start),
        "finished_at": _iso_us(finish),
        "environment_setup": {"started_at": _iso_us(start + 30), "finished_at": _iso_us(env_end)},
        "exception_info": None,
    }
    if bool(row.infra_error):
        # Errored before the agent ran (as Harbor records a failed Docker build): no agent, no verifier.
        result.update(
            agent_result=None,
            verifier_result=None,
            agent_setup=None,
            agent_execution=None,
            verifier=None,
            finished_at=_iso_us(env_end + 200),
            environment_setup={"started_at": _iso_us(start + 30), "finished_at": None},
            exception_info={
                "exception_type": "RuntimeError",
                "exception_message": "Docker compose command failed: build of service 'main' exited with code 1",
                "exception_traceback": "Traceback (most recent call last):\nRuntimeError: Docker compose command failed",
                "occurred_at": _iso_us(env_end, z=False),
            },
        )
        (tdir / "result.json").write_bytes(_dumps(result, compact=True))
        return
    success = bool(row.success)
    calls, _, edited = _plan_calls(
        rng, repo, profile, int(row.tool_calls_count), int(row.mcp_tool_calls), int(row.exploration_breadth), success
    )
    session = str(uuid.UUID(bytes=rng.bytes(16), version=4))
    traj, placed = _trajectory(rng, repo, calls, row, agent0, elapsed_ms, session, success, eff)
    (tdir / "agent").mkdir()
    (tdir / "agent" / "trajectory.json").write_bytes(_dumps(traj, compact=True))
    (tdir / "verifier").mkdir()
    # CTRF clock times are Unix seconds to the microsecond (16 digits), from integer milliseconds and seeded
    # draws by plain float sums (no library maths), hence the same everywhere.
    ctrf = _ctrf(rng, repo, (seed, 13 * 1000 + t_idx), success, ver0)
    (tdir / "verifier" / "ctrf.json").write_bytes(_dumps(ctrf, compact=True, digits=16))
    (tdir / "verifier" / "reward.txt").write_text("1\n" if success else "0\n")
    fm = traj["final_metrics"]
    result.update(
        agent_result={
            "n_input_tokens": fm["total_prompt_tokens"],
            "n_cache_tokens": fm["total_cached_tokens"],
            "n_output_tokens": fm["total_completion_tokens"],
            "cost_usd": fm["total_cost_usd"],
            "rollout_details": None,
            "metadata": None,
        },
        verifier_result={"rewards": {"reward": 1.0 if success else 0.0}},
        agent_setup={"started_at": _iso_us(env_end), "finished_at": _iso_us(agent0)},
        agent_execution={"started_at": _iso_us(agent0), "finished_at": _iso_us(agent1)},
        verifier={"started_at": _iso_us(ver0), "finished_at": _iso_us(ver1)},
    )
    if bool(row.agent_timeout):
        result["exception_info"] = {
            "exception_type": "AgentTimeoutError",
            "exception_message": f"Agent execution timed out after {eff.agent_timeout_sec} seconds",
            "exception_traceback": "Traceback (most recent call last):\nasyncio.exceptions.CancelledError\n\n"
            "harbor.trial.errors.AgentTimeoutError: Agent execution timed out",
            "occurred_at": _iso_us(agent1, z=False),
        }
    (tdir / "result.json").write_bytes(_dumps(result, compact=True))
    if profile == "codecanvas":
        state = _canvas_state(rng, repo, placed, edited)
        if state is not None:
            cdir = tdir / "agent" / "sessions" / "codecanvas"
            cdir.mkdir(parents=True)
            (cdir / "state.json").write_bytes(_dumps(state))
            (cdir / "architecture.png").write_bytes(_architecture_png(repo))
            for a in state["analyses"]:
                (cdir / a["png_path"]).write_bytes(_impact_png(a))
            if "board" in state["images"]:
                (cdir / "board.png").write_bytes(_board_png(state))


def _is_simulator_output(path: Path) -> bool:
    try:
        return json.loads((path / files.RUN_INDEX).read_text("utf-8")).get("simulated") is True
    except (OSError, ValueError, AttributeError):
        return False


def _preregister(runs: Path, first_start_ms: int) -> None:
    """The runner's pre-registration, as the runner writes it: the default plan, fixed a day before the first trial."""
    try:
        plan = plan_mod.load_plan()
    except plan_mod.PlanError:
        return  # a working folder without a valid plan: simulated runs without a record, as analysed runs may be
    fixed = _EPOCH + timedelta(milliseconds=first_start_ms) - timedelta(days=1)
    plan_mod.write_preregistration(runs, plan, plan_mod.PLAN_FILE.as_posix(), now=fixed)


def simulate_runs(
    out_dir: str | os.PathLike,
    seed: int,
    n_tasks: int = 24,
    repetitions: int = 3,
    effects: Effects | None = None,
    profiles: tuple[str, ...] | list[str] = DEFAULT_PROFILES,
    force: bool = False,
) -> Path:
    """Write simulated runs in the run layout under ``out_dir`` from the latent draws of :func:`simulate_metrics`.

    The tree is built in a temporary sibling folder and renamed into place, so a crash never leaves
    half a sample. ``out_dir`` must be absent or empty; with ``force`` it may also hold an earlier
    simulator output (``index.json`` with ``"simulated": true``), which is replaced.
    Returns ``out_dir``. Byte-reproducible: no wall clock, every random choice seeded.
    """
    out = Path(out_dir)
    eff = effects or Effects()
    profiles = tuple(profiles)
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        if not force:
            raise FileExistsError(f"{out}: not empty; use --force to replace an earlier simulator output")
        if not _is_simulator_output(out):
            raise FileExistsError(
                f'{out}: not empty and not a simulator output (no index.json with "simulated": true); refusing to replace it'
            )
    df = simulate_metrics(seed, n_tasks, repetitions, profiles, eff)
    tasks = task_ids(n_tasks)
    repos = [_repo(seed, t_idx, task) for t_idx, task in enumerate(tasks)]  # one per task, shared by its trials
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))
    try:
        runs = []
        for r_idx in range(repetitions):
            for p_idx, prof in enumerate(profiles):
                ms = _run_start_ms(seed, p_idx, r_idx, len(profiles), n_tasks)
                run_id = (_EPOCH + timedelta(milliseconds=ms)).strftime("%Y-%m-%d__%H-%M-%S") + f"__{prof}"
                runs.append({"run_id": run_id, "profile": prof, "repetition": r_idx + 1, "started_at": _iso_us(ms)})
                (tmp / run_id).mkdir()
                for t_idx, task in enumerate(tasks):
                    row = df.iloc[(p_idx * n_tasks + t_idx) * repetitions + r_idx]
                    assert row.task_id == task and row.profile == prof and row.repetition == r_idx + 1
                    _write_trial(tmp, seed, eff, row, (p_idx, t_idx, r_idx), repos[t_idx], run_id, ms, n_tasks)
        index = {
            "simulated": True,
            "generator": SIMULATOR,
            "seed": int(seed),
            "note": NOTE,
            "effects": eff.describe(),
            # A quadrature over 400 nodes: its last four or five digits vary between numpy/scipy builds.
            "true_effects": round_floats(true_effects(eff, profiles, BASELINE if BASELINE in profiles else profiles[0]), 10),
            "profiles": list(profiles),
            "baseline": BASELINE if BASELINE in profiles else profiles[0],
            "tasks": tasks,
            "repetitions": repetitions,
            "runs": runs,
            "agent": {"name": AGENT_NAME, "version": AGENT_VERSION, "model_name": MODEL},
        }
        (tmp / files.RUN_INDEX).write_bytes(_dumps(index))
        _preregister(tmp, min(_run_start_ms(seed, p, 0, len(profiles), n_tasks) for p in range(len(profiles))))
        null = effects is not None and eff == Effects.null(n_infra_errors=eff.n_infra_errors)
        (tmp / "README.md").write_text(_readme(seed, n_tasks, repetitions, profiles, null, eff.n_infra_errors))
        tmp.chmod(0o755)
        if out.exists():
            shutil.rmtree(out)
        os.replace(tmp, out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return out


def _readme(seed: int, n_tasks: int, repetitions: int, profiles: tuple[str, ...], null: bool, n_infra: int = 1) -> str:
    return (
        f"# {NOTE}\n\n"
        f"Simulated agent runs written by `{SIMULATOR}` (seed {seed}): {len(profiles)} profiles "
        f"({', '.join(profiles)}) x {n_tasks} tasks x {repetitions} repetitions.\n"
        f"{'No profile effect was injected (null effects).' if null else 'Effects were injected on purpose.'} "
        "`index.json` lists every injected effect with its description and the population values\n"
        "(`true_effects`) that the statistics should recover. Nothing here measures a real agent.\n\n"
        f"Regenerate: `python -m analysis_lib simulate --seed {seed} --out DIR --tasks {n_tasks} "
        f"--repetitions {repetitions}{' --null-effects' if null else ''}"
        f"{f' --infra-errors {n_infra}' if n_infra != 1 else ''}`\n"
    )
