"""The benchmark manifest (``manifest_version: 2``): tasks, conditions and the pinned environment.

Strict on purpose (unknown keys are rejected): the manifest is written by the experimenter, and a
typo such as ``mcp_confg`` must fail loudly instead of silently running both conditions without
MCP. Errors name the file and the JSON path (``tasks[2].evaluation.command``).
"""

from __future__ import annotations

import hashlib
import os
import shlex
from pathlib import Path
from typing import Annotated, Any, Literal

import orjson
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from ..core.fileio import loads_lenient, read_bytes
from ..core.trial import InputError

MANIFEST_VERSION = 2
ADAPTERS = ("claude_code", "command", "harbor")


class ManifestError(ValueError):
    """The manifest is invalid; the message names the file and every bad JSON path, one per line."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class EvaluationSpec(_Strict):
    """A task's verdict: ``command_json`` runs ``command`` (no shell) and reads JSON from its stdout."""

    type: Literal["command_json"]
    # argv list (preferred) or one string split with shlex; placeholders are substituted per argument.
    command: list[str] | str
    timeout_seconds: float = Field(600.0, gt=0)

    @field_validator("command")
    @classmethod
    def _argv(cls, v: list[str] | str) -> list[str]:
        argv = shlex.split(v) if isinstance(v, str) else list(v)
        if not argv or not argv[0]:
            raise ValueError("must name a program (an empty command cannot run)")
        return argv


class Task(_Strict):
    """One benchmark task: a repository at a commit and the instruction given to the agent."""

    id: str = Field(min_length=1, max_length=200)
    repo: str = Field(min_length=1, description="local path (relative to the manifest) or git URL")
    commit: str = Field(min_length=1, description="commit (or ref) the checkout starts from")
    instruction: str = Field(min_length=1)
    timeout_seconds: float | None = Field(None, gt=0, description="agent wall-clock limit")
    evaluation: EvaluationSpec | None = None

    @field_validator("id")
    @classmethod
    def _safe_id(cls, v: str) -> str:
        # The id becomes a directory name; anything else (even `;` or `$(...)`) is kept verbatim
        # because no shell ever sees it.
        if "/" in v or "\\" in v or "\x00" in v or v in (".", "..") or v.startswith("."):
            raise ValueError("must not contain '/', '\\' or NUL nor start with '.' (it names a directory)")
        return v


class ClaudeCodeSettings(_Strict):
    """Claude Code CLI (``claude -p``); ``mcp_config`` on for the treatment, null for the baseline."""

    mcp_config: str | None = Field(None, description="MCP config JSON file (relative to the manifest)")
    claude_bin: str = "claude"
    # ``claude -p`` cannot ask: without a mode that allows edits every Edit/Bash is denied. The
    # runner sets IS_SANDBOX=1 for bypassPermissions under root, which Claude Code otherwise refuses.
    permission_mode: Literal["bypassPermissions", "acceptEdits", "auto", "default", "dontAsk", "plan"] | None = "bypassPermissions"
    allowed_tools: list[str] = Field(default_factory=list, description="passed as --allowedTools")
    # Each trial gets its own CLAUDE_CONFIG_DIR: no user settings, plugins or memory leak in.
    isolate_config: bool = True
    # Passed verbatim after the fixed flags, e.g. ["--permission-mode", "bypassPermissions"].
    extra_args: list[str] = Field(default_factory=list)


class CommandSettings(_Strict):
    """Any agent: an argv template; its stdout is Claude stream-json, or it writes ATIF itself."""

    command: list[str] = Field(min_length=1)
    output: Literal["stream_json", "atif", "none"] = "stream_json"
    version_command: list[str] | None = None


class HarborSettings(_Strict):
    """Harbor (``harbor run``): the task's ``repo`` is a Harbor task directory or ``dataset`` is set."""

    harbor_bin: str = "harbor"
    agent: str = "claude-code"
    dataset: str | None = Field(None, description="e.g. terminal-bench@2.0; the task id is then a task name")
    extra_args: list[str] = Field(default_factory=list)


class _ConditionBase(_Strict):
    name: str = Field(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")


class ClaudeCodeCondition(_ConditionBase):
    adapter: Literal["claude_code"]
    settings: ClaudeCodeSettings = Field(default_factory=ClaudeCodeSettings)


class CommandCondition(_ConditionBase):
    adapter: Literal["command"]
    settings: CommandSettings


class HarborCondition(_ConditionBase):
    adapter: Literal["harbor"]
    settings: HarborSettings = Field(default_factory=HarborSettings)


Condition = Annotated[ClaudeCodeCondition | CommandCondition | HarborCondition, Field(discriminator="adapter")]


class PinnedEnvironment(_Strict):
    """What must be identical on both sides of a pair: model id, MCP tool commit (target commits are per task)."""

    model: str = Field(min_length=1, description="exact model id, e.g. claude-sonnet-4-5-20250929")
    tool_commit: str | None = Field(None, description="commit of the MCP tool under test")
    tool_repo: str | None = Field(None, description="checkout of the tool, to verify tool_commit with git")


class BudgetSettings(_Strict):
    """Prior for the spend projection, used until trials have measured costs."""

    estimated_cost_per_trial_usd: float = Field(1.0, ge=0)


class Manifest(_Strict):
    """A benchmark manifest, version 2."""

    manifest_version: Literal[2]
    name: str = Field("benchmark", min_length=1, pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
    description: str | None = None
    environment: PinnedEnvironment
    conditions: list[Condition] = Field(min_length=2)
    tasks: list[Task] = Field(min_length=1)
    budget: BudgetSettings = Field(default_factory=BudgetSettings)
    # Folder against which relative paths (repo, mcp_config, tool_repo) resolve; set by the loader.
    base_dir: str | None = Field(None, exclude=True)

    @model_validator(mode="after")
    def _unique(self) -> Manifest:
        for what, names in (("conditions", [c.name for c in self.conditions]), ("tasks", [t.id for t in self.tasks])):
            dup = sorted({n for n in names if names.count(n) > 1})
            if dup:
                raise ValueError(f"{what}: duplicate name(s) {', '.join(map(repr, dup))}")
        return self

    def __repr__(self) -> str:
        # Short on purpose: the full manifest (instructions included) is in to_json().
        return (f"Manifest(name={self.name!r}, model={self.environment.model!r}, "
                f"conditions={[c.name for c in self.conditions]!r}, tasks={len(self.tasks)})")

    __str__ = __repr__

    def condition(self, name: str) -> Condition:
        for c in self.conditions:
            if c.name == name:
                return c
        raise ValueError(f"condition: unknown {name!r}; allowed: {', '.join(c.name for c in self.conditions)}")

    def task(self, task_id: str) -> Task:
        for t in self.tasks:
            if t.id == task_id:
                return t
        raise ValueError(f"task_id: unknown {task_id!r} in manifest {self.name!r}")

    def resolve(self, path: str) -> str:
        """A manifest-relative local path made usable from the current directory."""
        if self.base_dir is None or os.path.isabs(path) or is_url(path):
            return path
        return os.path.normpath(os.path.join(self.base_dir, path))

    def to_json(self) -> dict[str, Any]:
        return self.model_dump(mode="json", exclude_none=True)


def is_url(repo: str) -> bool:
    return "://" in repo or repo.startswith("git@")


def _json_path(loc: tuple[Any, ...]) -> str:
    out = ""
    for i, part in enumerate(loc):
        if isinstance(part, int):
            out += f"[{part}]"
        elif part in ADAPTERS and i > 0 and isinstance(loc[i - 1], int):
            continue  # pydantic's discriminator tag, not a JSON key
        else:
            out += ("." if out else "") + str(part)
    return out or "(root)"


def format_validation_error(source: str, exc: ValidationError) -> str:
    lines = [f"{source}: invalid manifest ({exc.error_count()} error(s))"]
    for err in exc.errors():
        msg = err["msg"].removeprefix("Value error, ")
        lines.append(f"  {_json_path(tuple(err['loc']))}: {msg}")
    return "\n".join(lines)


def parse_manifest(obj: Any, source: str = "<manifest>", base_dir: str | None = None) -> Manifest:
    """Validate a parsed manifest object; raise :class:`ManifestError` naming ``source`` and the JSON paths."""
    if not isinstance(obj, dict):
        raise ManifestError(f"{source}: invalid manifest: expected a JSON object, got {type(obj).__name__}")
    version = obj.get("manifest_version")
    if version != MANIFEST_VERSION:
        raise ManifestError(f"{source}: manifest_version: expected {MANIFEST_VERSION}, got {version!r}")
    try:
        return Manifest.model_validate({**obj, "base_dir": base_dir})
    except ValidationError as exc:
        raise ManifestError(format_validation_error(source, exc)) from None


def load_manifest(path: str | os.PathLike) -> Manifest:
    """Read and validate a manifest file; relative paths inside it resolve against its folder."""
    try:
        data = read_bytes(path, stage="manifest")
        obj = loads_lenient(data, path, stage="manifest")
    except InputError as exc:
        raise ManifestError(str(exc)) from None
    return parse_manifest(obj, str(path), base_dir=str(Path(path).parent))


def manifest_sha256(manifest: Manifest) -> str:
    """Content hash of the validated manifest (not of the file's bytes), to detect changes on resume."""
    blob = orjson.dumps(manifest.to_json(), option=orjson.OPT_SORT_KEYS)
    return hashlib.sha256(blob).hexdigest()
