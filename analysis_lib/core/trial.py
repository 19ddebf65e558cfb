"""The typed trial: what every ingest reader produces, whatever the source format.

A trial is one attempt of one agent configuration (profile) at one task. Readers fill
what their format carries and leave the rest ``None``; metrics treat ``None`` as unknown,
never as zero.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

# Categories of the tool taxonomy (see analysis_lib.core.tools).
TOOL_CATEGORIES = ("read", "search", "edit", "execute", "mcp", "other")


@dataclass(slots=True)
class ToolCall:
    """One tool call of an agent step, with its result as far as the trace tells."""

    step_id: int
    name: str
    arguments: dict[str, Any]
    call_id: str | None = None
    # True/False when the producer marked the result; None when it did not say.
    is_error: bool | None = None
    # Result text, truncated to a display-sized prefix (huge observations are cut at parse time).
    output: str | None = None
    output_chars: int = 0


@dataclass(slots=True)
class Step:
    """One ATIF step (system, user or agent)."""

    step_id: int
    source: str  # "system" | "user" | "agent"
    # ISO 8601 text as written (parsed only where needed: parsing every step costs ingest time).
    timestamp: str | None = None
    message: str = ""
    model_name: str | None = None
    prompt_tokens: int | None = None  # ATIF semantics: includes cached tokens
    completion_tokens: int | None = None
    cached_tokens: int | None = None
    # Anthropic cache writes of the call (metrics.extra.cache_creation_input_tokens); some producers leave
    # them out of prompt_tokens (analysis_lib.metrics.tokens decides).
    cache_write_tokens: int | None = None
    cost_usd: float | None = None
    tool_calls: list[ToolCall] = field(default_factory=list)
    # Observation results without a matching tool call (terminus-2, parse errors).
    observations: list[str] = field(default_factory=list)
    is_copied_context: bool = False
    # Identifies the API call whose usage this step reports; steps sharing one are counted once.
    usage_key: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass(slots=True)
class FinalMetrics:
    """ATIF ``final_metrics``: totals reported by the producer (any field may be missing)."""

    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    cached_tokens: int | None = None
    cost_usd: float | None = None
    total_steps: int | None = None
    # Anthropic cache writes (``extra.total_cache_creation_input_tokens``), part of prompt_tokens.
    cache_write_tokens: int | None = None


@dataclass(slots=True)
class Trajectory:
    """A parsed ATIF trajectory, continuation segments merged, subagents kept apart."""

    schema_version: str
    agent_name: str | None = None
    agent_version: str | None = None
    model_name: str | None = None
    session_id: str | None = None
    steps: list[Step] = field(default_factory=list)
    final_metrics: FinalMetrics | None = None
    subagents: list[Trajectory] = field(default_factory=list)
    source_path: str | None = None
    # Where the parent trajectory started this one (a subagent): the call whose result refers to it, and
    # that call's step; None for the root, and for a subagent no result refers to.
    parent_call_id: str | None = None
    parent_step_id: int | None = None
    # Warnings raised while parsing leniently (unknown minor version, unresolved refs...).
    warnings: list[str] = field(default_factory=list)
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass(slots=True)
class TestResult:
    """One test of a verifier report (CTRF or imported), durations in seconds."""

    __test__ = False  # not a pytest test class

    name: str
    status: str  # passed | failed | skipped | pending | other
    duration_sec: float | None = None
    file_path: str | None = None
    suite: str | None = None
    message: str | None = None


@dataclass(slots=True)
class Timing:
    """Wall-clock markers of a trial (UTC where the source says so)."""

    started_at: datetime | None = None
    finished_at: datetime | None = None
    agent_started_at: datetime | None = None
    agent_finished_at: datetime | None = None


@dataclass(slots=True)
class Trial:
    """One trial of one profile on one task, as produced by every ingest reader."""

    profile: str
    task_id: str
    repetition: int
    run_id: str
    trial_path: str
    source_format: str  # run_layout | harbor | tb1 | inspect | mcpbr | claude_code
    trajectory: Trajectory | None = None
    tests: list[TestResult] | None = None
    reward: float | None = None
    timing: Timing = field(default_factory=Timing)
    # Exception raised by the harness (Harbor exception_info): "Type: message" (truncated).
    exception: str | None = None
    # Paths of the files the trial was read from, by role (trajectory, ctrf, reward, result, codecanvas).
    paths: dict[str, str] = field(default_factory=dict)
    # Agent name, model, harness config bits, environment pins.
    metadata: dict[str, Any] = field(default_factory=dict)
    # Metric values carried by formats without a trajectory (TB1, Inspect, mcpbr), by metric id.
    carried_metrics: dict[str, Any] = field(default_factory=dict)
    # Non-fatal problems met while reading this trial.
    warnings: list[str] = field(default_factory=list)


@dataclass(slots=True, frozen=True)
class IngestError:
    """One unreadable input: the file, the stage that failed and a one-line reason."""

    path: str
    stage: str  # discover | trajectory | ctrf | reward | result | codecanvas | convert | import | metrics
    message: str
    # "error": the input (or part of it) could not be used; "warning": used, with the stated loss.
    severity: str = "error"

    def line(self) -> str:
        return f"{self.severity}: {self.path}: {self.stage}: {self.message}"


class InputError(ValueError):
    """A file could not be read as the format it should be; the message names the file."""

    def __init__(self, path: str, stage: str, message: str):
        super().__init__(f"{path}: {message}")
        self.error = IngestError(str(path), stage, message)



def trial_record(config: dict[str, Any] | None, *, agent_name: str | None, model_name: str | None) -> dict[str, Any]:
    """A trial's configuration record (dotted keys, see :func:`analysis_lib.ingest.harbor.run_config`), with the
    agent and model of sources that record no configuration."""
    out = {k: v for k, v in (config or {}).items() if v is not None}
    if agent_name is not None:
        out.setdefault("agent.name", agent_name)
    if model_name is not None:
        out.setdefault("agent.model_name", model_name)
    return dict(sorted(out.items()))
