"""Arm-blinding of what a judge sees: profile, MCP server and MCP tool names become neutral tokens.

A judge that reads ``mcp__codegraph__search_code`` or the profile name knows the arm, and its
strategy and failure labels can follow the arm instead of the behaviour. Every such name is
replaced before rendering: full MCP tool names by ``tool_A``, ``tool_B``..., server names by
``server_1``..., profile names by ``arm`` (``arm_1``... when a prompt shows several arms).
Tokens are assigned in order of first appearance, so they are consistent within one prompt.

A profile name that is an ordinary word (``text``, ``default``...) is replaced only where the
prompt names the profile, not in the trajectory, where the word has its everyday meaning.
"""

from __future__ import annotations

import re
import string
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from ..core.tools import DEFAULT_MCP_TOOLS, is_mcp
from ..core.trial import Trial

# Profile names that are everyday words: blinded in the profile field only.
COMMON_WORDS = frozenset({"text", "default", "base", "plain", "none", "control", "baseline", "standard", "vanilla"})


@dataclass(frozen=True)
class Vocabulary:
    """The arm-identifying names of a run: profiles, MCP servers and MCP tools (full and bare names)."""

    profiles: frozenset[str]
    servers: frozenset[str]
    tools: frozenset[str]  # full call names, e.g. mcp__codegraph__search_code or codegraph__search_code
    bare_tools: frozenset[str]  # the tool part, e.g. search_code


def split_tool(name: str) -> tuple[str | None, str]:
    """(server, tool) of an MCP call name: ``mcp__srv__tool`` and ``srv__tool`` give srv; a bare name gives None."""
    parts = name.split("__")
    if parts[0] == "mcp" and len(parts) >= 3:
        return parts[1], "__".join(parts[2:])
    if len(parts) >= 2 and parts[0]:
        return parts[0], "__".join(parts[1:])
    return None, name


def vocabulary(trials: Iterable[Trial], mcp_tools: Iterable[str] = DEFAULT_MCP_TOOLS) -> Vocabulary:
    """Collect the names to hide from every trial of a run (so a baseline prompt naming a server is blinded too)."""
    tools_set = set(mcp_tools)
    profiles, servers, tools, bare = set(), set(), set(), set()
    for t in trials:
        profiles.add(t.profile)
        if t.trajectory is None:
            continue
        for s in t.trajectory.steps:
            for c in s.tool_calls:
                if not is_mcp(c.name, tools_set):
                    continue
                server, tool = split_tool(c.name)
                tools.add(c.name)
                bare.add(tool)
                if server:
                    servers.add(server)
    return Vocabulary(frozenset(profiles), frozenset(servers), frozenset(tools), frozenset(bare))


def _token_pattern(name: str) -> re.Pattern:
    return re.compile(rf"(?<![A-Za-z0-9]){re.escape(name)}(?![A-Za-z0-9])", re.IGNORECASE)


@dataclass
class Blinder:
    """Replaces the names of a :class:`Vocabulary` in texts; ``mapping`` keeps token -> original name."""

    vocab: Vocabulary
    arms_in_prompt: int = 1
    mapping: dict[str, str] = field(default_factory=dict)
    _assigned: dict[str, str] = field(default_factory=dict)

    def _token(self, kind: str, name: str) -> str:
        key = f"{kind}:{name.lower()}"
        if key not in self._assigned:
            n = sum(1 for k in self._assigned if k.startswith(kind + ":"))
            if kind == "tool":
                tok = f"tool_{string.ascii_uppercase[n % 26]}{'' if n < 26 else n // 26}"
            elif kind == "server":
                tok = f"server_{n + 1}"
            else:
                tok = "arm" if self.arms_in_prompt == 1 else f"arm_{n + 1}"
            self._assigned[key] = tok
            self.mapping[tok] = name
        return self._assigned[key]

    def profile(self, name: str) -> str:
        """The token shown for a profile name."""
        return self._token("arm", name)

    def text(self, s: str) -> str:
        """``s`` with every full tool name, server, bare MCP tool and (non-word) profile name replaced."""
        # Tokens are numbered by first appearance in the text, so find all names before replacing.
        found: list[tuple[int, int, str, str]] = []  # (start, end, kind, name)
        taken: list[tuple[int, int]] = []
        # Any server__tool or mcp__server__tool spelling, also of a tool this run never called.
        servers = "|".join(re.escape(x) for x in sorted(self.vocab.servers, key=len, reverse=True))
        full = r"mcp__[A-Za-z0-9-]+__[A-Za-z0-9_]+" + (rf"|(?:{servers})__[A-Za-z0-9_]+" if servers else "")
        for m in re.finditer(rf"(?<![A-Za-z0-9])(?:{full})", s, re.IGNORECASE):
            taken.append((m.start(), m.end()))
            found.append((m.start(), m.end(), "tool", m.group(0)))
        names = [("tool", n) for n in self.vocab.tools] + [("profile", n) for n in self.vocab.profiles if n.lower() not in COMMON_WORDS]
        names += [("server", n) for n in self.vocab.servers] + [("bare", n) for n in self.vocab.bare_tools]
        for kind, name in sorted(names, key=lambda kn: -len(kn[1])):  # longest first: full names before their parts
            for m in _token_pattern(name).finditer(s):
                if any(m.start() < e and b < m.end() for b, e in taken):
                    continue
                taken.append((m.start(), m.end()))
                found.append((m.start(), m.end(), kind, name))
        out, pos = [], 0
        for start, end, kind, name in sorted(found):
            out.append(s[pos:start])
            if kind == "tool":
                server, bare = split_tool(name)
                self._token("server", server) if server else None
                out.append(self._token("tool", bare))
            elif kind == "bare":
                out.append(self._token("tool", name))
            elif kind == "server":
                out.append(self._token("server", name))
            else:
                out.append(self.profile(name))
            pos = end
        out.append(s[pos:])
        return "".join(out)

    def value(self, v: Any) -> Any:
        """Blind strings inside any JSON-like value."""
        if isinstance(v, str):
            return self.text(v)
        if isinstance(v, list):
            return [self.value(x) for x in v]
        if isinstance(v, dict):
            return {k: self.value(x) for k, x in v.items()}
        return v


def unblind(v: Any, mapping: dict[str, str]) -> Any:
    """Map tokens in an answer back to the original names (e.g. a comparative ``winner``)."""
    if isinstance(v, str):
        if v in mapping:
            return mapping[v]
        return re.sub(r"\b(arm(?:_\d+)?|tool_[A-Z]\d*|server_\d+)\b", lambda m: mapping.get(m.group(1), m.group(1)), v)
    if isinstance(v, list):
        return [unblind(x, mapping) for x in v]
    if isinstance(v, dict):
        return {k: unblind(x, mapping) for k, x in v.items()}
    return v
