"""When a reward is a pass (the success rule), and whether a trial offered MCP tools used them."""

from __future__ import annotations

import functools
import re
from typing import Any

__all__ = ["DEFAULT_SUCCESS", "parse_success", "reward_succeeds", "used_mcp"]


DEFAULT_SUCCESS = "reward == 1"


_SUCCESS = re.compile(r"^\s*reward\s*(==|>=|>)\s*([0-9]*\.?[0-9]+)\s*$")


def parse_success(rule: str) -> tuple[str, float]:
    """``"reward > 0"`` -> ``(">", 0.0)``; the comparisons allowed are ``==``, ``>=`` and ``>``."""
    m = _SUCCESS.match(str(rule))
    if not m:
        raise ValueError(f"success rule {rule!r}: write 'reward == 1', 'reward >= X' or 'reward > X'")
    return m.group(1), float(m.group(2))


@functools.lru_cache(maxsize=16)
def _success_op(rule: str) -> tuple[str, float]:
    return parse_success(rule)


def reward_succeeds(reward: float, rule: str = DEFAULT_SUCCESS) -> bool:
    """Whether ``reward`` is a pass under ``rule`` (the default: a reward of exactly 1)."""
    op, x = _success_op(rule)
    r = float(reward)
    return r == x if op == "==" else r >= x if op == ">=" else r > x


def used_mcp(recorded: Any, mcp_calls: Any) -> bool | None:
    """Whether a trial offered MCP tools used them: as recorded (the runner's ``mcp_used``), else whether an
    MCP call ran (``mcp_tool_calls > 0``); None when neither is known (no call record)."""
    if isinstance(recorded, bool) or (type(recorded).__module__ == "numpy" and "bool" in type(recorded).__name__):
        return bool(recorded)
    if isinstance(recorded, str) and recorded.lower() in ("true", "false"):
        return recorded.lower() == "true"
    try:
        calls = float(mcp_calls)
    except (TypeError, ValueError):
        return None
    return None if calls != calls else calls > 0  # NaN: no call record
