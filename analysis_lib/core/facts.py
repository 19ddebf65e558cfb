"""The facts of one trial that the registry's metric functions read: the type they are written against.

The registry (:mod:`analysis_lib.core.registry`) holds each metric's function; :mod:`analysis_lib.metrics.trial_metrics`
works the facts out of a trial (``TrialFacts``) and loops over the registry. Both import this module, so neither
imports the other.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Protocol

from .trial import Step, Trajectory, Trial

__all__ = ["Outcome", "CallWalk", "Thresholds", "Tokens", "Facts"]


@dataclass(frozen=True, slots=True)
class Outcome:
    reward: float | None
    success: bool | None
    infra: bool


@dataclass(slots=True)
class CallWalk:
    """One pass over a trajectory's tool calls in call order (subagents' included): what the process metrics count."""

    calls: int = 0
    agent_steps: int = 0  # root's and subagents' (the denominator of tools_per_step)
    names: Counter[str] = field(default_factory=Counter)
    categories: Counter[str] = field(default_factory=Counter)
    errors: int = 0
    loops: int = 0
    max_streak: int = 0
    read_files: set[str] = field(default_factory=set)
    edited_files: set[str] = field(default_factory=set)
    backtracks: int = 0
    duplicate_reads: int = 0
    searched_before_edit: bool | None = None  # None: nothing was edited
    mcp_by_tool: Counter[str] = field(default_factory=Counter)
    mcp_calls: int = 0
    discovery: int = 0
    mcp_discovery: int = 0
    refused_mcp: int = 0
    first_edit_position: int | None = None
    first_edit_timestamp: str | None = None


class Thresholds(Protocol):
    """The thresholds of the failure flags (``MetricsConfig``)."""

    @property
    def tool_misuse_error_rate(self) -> float: ...

    @property
    def infinite_loop_streak(self) -> int: ...

    @property
    def budget_exhaustion_tokens(self) -> int: ...

    @property
    def premature_stop_steps(self) -> int: ...


class Tokens(Protocol):
    """A trial's token counts (``TokenCount``)."""

    @property
    def input(self) -> int | None: ...

    @property
    def output(self) -> int | None: ...

    @property
    def cached(self) -> int | None: ...


class Facts(Protocol):
    """What a metric function may read of one trial; ``facts[id]`` is another metric's value."""

    trial: Trial
    traj: Trajectory | None
    steps: list[Step]

    def __getitem__(self, metric_id: str) -> Any: ...

    @property
    def config(self) -> Thresholds: ...

    @property
    def outcome(self) -> Outcome: ...

    @property
    def tests(self) -> tuple[int, int, int] | None: ...

    @property
    def tokens(self) -> Tokens: ...

    @property
    def cost(self) -> tuple[float | None, bool]: ...

    @property
    def elapsed(self) -> float | None: ...

    @property
    def walk(self) -> CallWalk | None: ...

    @property
    def tool_names(self) -> dict[str, int] | None: ...

    @property
    def mcp_by_tool(self) -> dict[str, int] | None: ...

    @property
    def first_edit_seconds(self) -> float | None: ...
