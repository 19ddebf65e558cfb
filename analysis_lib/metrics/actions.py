"""A trajectory as the sequence of actions the divergence of discordant trials compares, kept with each row.

One action per tool call of the root trajectory in order (subagents' calls and copied context left out):
``(tool name, target)``, where the target is the first file the call edits, else the first file it reads
(from its arguments or its shell command, :func:`analysis_lib.core.tools.call_effects`; ``./`` and quotes
stripped), else for a shell call the program it runs (the command's first word), else empty (searches,
MCP calls: the tool's name alone). It is worked out when the trial is read for its metrics, so that the
divergence table never reads the runs a second time
(:mod:`analysis_lib.inference.beside_itt.divergence`).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import orjson

from ..core.tools import DEFAULT_MCP_TOOLS, call_effects, categorize, shell_command
from ..core.trial import Trajectory

__all__ = ["Action", "TrialActions", "actions", "encode_actions", "parse_actions"]


@dataclass(frozen=True, slots=True)
class Action:
    """One tool call as the divergence compares it: the tool's name and its canonical target."""

    name: str
    target: str
    mcp: bool

    def key(self) -> tuple[str, str]:
        return self.name, self.target

    def text(self) -> str:
        return f"{self.name} {self.target}".strip()


def _norm(path: str) -> str:
    p = path.strip().strip("'\"")
    while p.startswith("./"):
        p = p[2:]
    return p.rstrip("/") or p


def actions(traj: Trajectory | None, mcp_tools: frozenset[str] = DEFAULT_MCP_TOOLS) -> list[Action] | None:
    """The action sequence of a trajectory's root steps (module docstring); None without a trajectory."""
    if traj is None:
        return None
    out = []
    for step in traj.steps:
        if step.is_copied_context:
            continue
        for call in step.tool_calls:
            args = call.arguments if isinstance(call.arguments, dict) else {}
            cat = categorize(call.name, args, mcp_tools)
            reads, edits, _ = call_effects(call.name, args, cat)
            target = _norm(edits[0]) if edits else _norm(reads[0]) if reads else ""
            if not target and cat == "execute":
                words = (shell_command(call.name, args) or "").split()
                target = words[0] if words else ""
            out.append(Action(call.name, target, cat == "mcp"))
    return out


def encode_actions(seq: list[Action] | None) -> str | None:
    """The sequence as JSON text of ``[name, target, mcp]`` lists: a plain value for a row (the trials cache, the pool's
    results) and for ``trial_actions.json``."""
    return None if seq is None else orjson.dumps([[a.name, a.target, a.mcp] for a in seq]).decode()


def parse_actions(value: Any) -> list[Action] | None:
    """The sequence back from :func:`encode_actions`' text, or its parsed lists (None stays None: no trajectory)."""
    if value is None or (isinstance(value, float) and value != value):
        return None
    items = orjson.loads(value) if isinstance(value, str) else value
    return [Action(str(n), str(t), bool(m)) for n, t, m in items]


class TrialActions(Mapping[str, "list[Action] | None"]):
    """Each trial's action sequence by trial path, kept as :func:`encode_actions`' text and decoded when looked up:
    only the divergence table reads them, and a study is opened by many commands that do not."""

    def __init__(self, encoded: Mapping[str, Any] | None = None) -> None:
        self._encoded = dict(encoded or {})  # path -> JSON text, its parsed lists, or None (no trajectory)

    def __getitem__(self, path: str) -> list[Action] | None:
        return parse_actions(self._encoded[path])

    def __iter__(self) -> Iterator[str]:
        return iter(self._encoded)

    def __len__(self) -> int:
        return len(self._encoded)

    def to_json(self) -> bytes:
        """The JSON object of ``trial_actions.json``: one trial per line, sorted by path, ``[name, target, mcp]``
        lists as encoded (nothing decoded to be written again)."""
        def value(v: Any) -> bytes:
            return b"null" if v is None or (isinstance(v, float) and v != v) else v.encode() if isinstance(v, str) \
                else orjson.dumps(v)
        lines = [b"  " + orjson.dumps(p) + b": " + value(self._encoded[p]) for p in sorted(self._encoded)]
        return b"{\n" + b",\n".join(lines) + (b"\n}\n" if lines else b"}\n")
