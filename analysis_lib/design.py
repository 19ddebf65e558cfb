"""The study design: which trials form each arm, how a task is named in every arm, which rerun counts,
how a reward becomes a pass, and where the data came from.

Runs rarely record their own design. Two Harbor jobs of one agent and model, one of them with an MCP
server configured, look like one configuration with more repetitions; the same task may be named
``linux-hda-intel-suspend-fault-001`` in one arm and ``mcp_linux-hda-intel-suspend-fault-001_0pqsfs``
in the other. A study file (YAML; ``--study FILE`` on the command line, the ``study`` parameter of
the paper pipeline, ``design=`` in the Python API) declares what the runs do not say::

    name: CodeScaleBench csb_sdlc, Claude Code + Haiku 4.5 with and without Sourcegraph MCP
    source: {name: CodeScaleBench, url: https://github.com/sourcegraph/CodeContextBench}
    baseline: baseline
    arms:
      baseline: {paths: ["*/*/baseline/**"], mcp: false}
      mcp:      {paths: ["*/*/mcp/**"], mcp: true}
    task_id: {folder: 1}            # the name of the trial folder's parent
    repetition: {regex: '_(?P<rep>\\d+)$'}
    reruns: last                    # first | last | all (extra attempts become repetitions)
    success: reward > 0

An arm is chosen by path globs (relative to the runs folder, ``*`` within one folder name, ``**``
across folders) and/or by fields of the trial's own record (its configuration, flattened to dotted
keys: ``agent.import_path``, ``agent.kwargs.mcp_config``, ``agent.mcp_servers``, ``profile`` for the
runner's condition...). A trial that matches no arm, or several, is left out with one warning row.
Without a study file the default rules of each reader stand (:mod:`analysis_lib.ingest`), and the
design audit warns about anything they pool despite a different configuration.
"""

from __future__ import annotations

import functools
import hashlib
import os
import re
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import orjson
import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from .trial import IngestError

__all__ = ["DesignError", "StudyDesign", "Arm", "Assignment", "load_design", "parse_design", "assign", "apply_design",
           "trial_record", "glob_regex", "reward_succeeds", "used_mcp", "DEFAULT_SUCCESS", "RERUN_COLUMNS"]

DEFAULT_SUCCESS = "reward == 1"
_SUCCESS = re.compile(r"^\s*reward\s*(==|>=|>)\s*([0-9]*\.?[0-9]+)\s*$")


class DesignError(ValueError):
    """A study file that cannot be used; the message is one line naming the file and the key."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class TaskRule(_Strict):
    """How a trial's task id is read: a folder name, or a named group ``task`` of a regular expression."""

    # The name of the folder this many levels above the trial's own (0: the trial folder itself).
    folder: int | None = Field(default=None, ge=0, le=12)
    # Applied (re.search) to ``field``; the group named ``task`` is the task id.
    regex: str | None = None
    field: Literal["task_name", "trial_name", "folder"] = "task_name"

    @model_validator(mode="after")
    def _one_rule(self) -> TaskRule:
        if (self.folder is None) == (self.regex is None):
            raise ValueError("give exactly one of folder (levels above the trial folder) or regex")
        if self.regex is not None:
            _named_group(self.regex, "task")
        return self


class RepetitionRule(_Strict):
    """The repetition number read from the trial folder's name (group ``rep``), e.g. ``_(?P<rep>\\d+)$``."""

    regex: str

    @field_validator("regex")
    @classmethod
    def _has_rep(cls, v: str) -> str:
        _named_group(v, "rep")
        return v


class VersionRule(_Strict):
    """The dataset version of a trial: a constant, or a dotted key of its configuration record."""

    value: str | None = None
    field: str | None = None

    @model_validator(mode="after")
    def _one_rule(self) -> VersionRule:
        if (self.value is None) == (self.field is None):
            raise ValueError("give exactly one of value or field")
        return self


class Arm(_Strict):
    """One arm: the trials its selectors match (every selector given must match)."""

    paths: list[str] = Field(default_factory=list)
    fields: dict[str, Any] = Field(default_factory=dict)
    # Whether this arm was offered MCP tools (None: not declared).
    mcp: bool | None = None
    task_id: TaskRule | None = None
    dataset_version: VersionRule | None = None

    @model_validator(mode="after")
    def _selects(self) -> Arm:
        if not self.paths and not self.fields:
            raise ValueError("an arm needs paths (globs) or fields to select its trials")
        for p in self.paths:
            glob_regex(p)
        return self

    def rule(self) -> str:
        """The selector in words, for ``--list`` and the audit."""
        parts = [f"path {' or '.join(self.paths)}"] if self.paths else []
        parts += [f"{k} = {orjson.dumps(v).decode()}" for k, v in sorted(self.fields.items())]
        return " and ".join(parts)


class Source(_Strict):
    """Where the runs come from, named in every report made from them."""

    name: str
    url: str | None = None
    commit: str | None = None
    licence: str | None = None
    note: str | None = None

    def line(self) -> str:
        where = f" ({self.url}" + (f" at {self.commit[:12]}" if self.commit else "") + ")" if self.url else ""
        return f"{self.name}{where}"


class StudyDesign(_Strict):
    """A study file, validated. ``path`` is where it was read from (not part of the design)."""

    name: str
    simulated: bool = False
    source: Source | None = None
    baseline: str | None = None
    arms: dict[str, Arm] = Field(min_length=1)
    task_id: TaskRule | None = None
    repetition: RepetitionRule | None = None
    reruns: Literal["first", "last", "all"] = "all"
    dataset_version: VersionRule | None = None
    success: str = DEFAULT_SUCCESS

    @field_validator("success")
    @classmethod
    def _success_rule(cls, v: str) -> str:
        parse_success(v)
        return v

    @field_validator("arms")
    @classmethod
    def _arm_names(cls, v: dict[str, Arm]) -> dict[str, Arm]:
        for name in v:
            if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.@+-]*", name):
                raise ValueError(f"arm name {name!r}: letters, digits and _ . @ + - only")
        return v

    @model_validator(mode="after")
    def _baseline_is_arm(self) -> StudyDesign:
        if self.baseline is not None and self.baseline not in self.arms:
            raise ValueError(f"baseline {self.baseline!r} is not an arm; arms are {sorted(self.arms)}")
        return self

    def sha256(self) -> str:
        """Hash of the design (its parsed, canonical form): recorded with the outputs made from it."""
        return hashlib.sha256(orjson.dumps(self.model_dump(mode="json"), option=orjson.OPT_SORT_KEYS)).hexdigest()

    def mcp_arms(self) -> list[str]:
        return [name for name, arm in self.arms.items() if arm.mcp]


def _named_group(pattern: str, group: str) -> None:
    try:
        compiled = re.compile(pattern)
    except re.error as exc:
        raise ValueError(f"regex {pattern!r} does not compile ({exc})") from None
    if group not in compiled.groupindex:
        raise ValueError(f"regex {pattern!r} needs a named group (?P<{group}>...)")


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


@functools.lru_cache(maxsize=256)
def glob_regex(pattern: str) -> re.Pattern[str]:
    """A path glob as a regular expression: ``*`` and ``?`` stay within one folder name, ``**`` spans folders.

    A pattern matches a trial's path relative to the runs folder, or any folder above the trial
    (``baseline/**`` and ``baseline`` both select everything under ``baseline/``).
    """
    if not pattern or pattern.startswith("/") or "\\" in pattern:
        raise ValueError(f"path glob {pattern!r}: give a relative path with / between folders")
    out = []
    parts = pattern.strip("/").split("/")
    for i, part in enumerate(parts):
        last = i == len(parts) - 1
        if part == "**":
            out.append(".*" if last else "(?:[^/]+/)*")
            continue
        piece = "".join("[^/]*" if c == "*" else "[^/]" if c == "?" else re.escape(c) for c in part)
        out.append(piece + ("" if last else "/"))
    return re.compile("^" + "".join(out) + "(?:/.*)?$")


def _lookup(record: dict[str, Any], key: str) -> Any:
    """A dotted key of a flattened record, or of its nested form (``agent.kwargs.x``)."""
    if key in record:
        return record[key]
    prefix = key + "."
    nested = {k[len(prefix):]: v for k, v in record.items() if k.startswith(prefix)}
    return nested or None


def _matches(value: Any, wanted: Any) -> bool:
    if wanted is None:  # null: the key is absent or empty (not configured)
        return value is None or value == {} or value == []
    if isinstance(wanted, list):
        return any(_matches(value, w) for w in wanted)
    if isinstance(value, (dict, list)) or isinstance(wanted, (dict, list)):
        return orjson.dumps(value, option=orjson.OPT_SORT_KEYS) == orjson.dumps(wanted, option=orjson.OPT_SORT_KEYS)
    if isinstance(wanted, bool) or isinstance(value, bool):
        return value is wanted
    if isinstance(wanted, (int, float)) and isinstance(value, (int, float)):
        return float(value) == float(wanted)
    return value is not None and str(value) == str(wanted)


def _arm_matches(arm: Arm, rel_path: str, record: dict[str, Any]) -> bool:
    if arm.paths and not any(glob_regex(p).match(rel_path) for p in arm.paths):
        return False
    return all(_matches(_lookup(record, k), v) for k, v in arm.fields.items())


def trial_record(config: dict[str, Any] | None, *, agent_name: str | None, model_name: str | None) -> dict[str, Any]:
    """A trial's configuration record (dotted keys, see :func:`analysis_lib.ingest.harbor.run_config`), with the
    agent and model of sources that record no configuration."""
    out = {k: v for k, v in (config or {}).items() if v is not None}
    if agent_name is not None:
        out.setdefault("agent.name", agent_name)
    if model_name is not None:
        out.setdefault("agent.model_name", model_name)
    return dict(sorted(out.items()))


@dataclass(frozen=True, slots=True)
class Assignment:
    """Where a trial goes under a design: its arm and task id, the repetition its folder names (None: by
    start time) and its dataset version; ``problem`` says why it goes nowhere (no arm, several arms)."""

    arm: str | None
    task_id: str
    repetition: int | None = None
    dataset_version: str | None = None
    problem: str | None = None


def assign(design: StudyDesign, *, rel_path: str, task_id: str, task_name: str | None, trial_name: str | None,
           record: dict[str, Any]) -> Assignment:
    """The arm, task id, repetition and dataset version of one trial under ``design``.

    ``rel_path``: the trial's folder (or file) relative to the runs folder, with ``/``; ``task_id``:
    the id the default rules gave; ``task_name``/``trial_name``: as the source names them;
    ``record``: the trial's configuration, flattened to dotted keys (plus ``profile``).
    """
    rel_path = rel_path.replace(os.sep, "/")
    arms = [name for name, arm in design.arms.items() if _arm_matches(arm, rel_path, record)]
    if len(arms) != 1:
        problem = (f"matches no arm of the study design ({', '.join(sorted(design.arms))})" if not arms
                   else f"matches several arms of the study design ({', '.join(arms)}); arms must not overlap")
        return Assignment(None, task_id, problem=problem)
    name = arms[0]
    arm = design.arms[name]
    folders = rel_path.split("/")
    task = _task_of(arm.task_id or design.task_id, folders, task_id, task_name, trial_name)
    if task is None:
        rule = arm.task_id or design.task_id
        return Assignment(None, task_id, problem=f"the task rule {rule.model_dump(exclude_none=True)} finds no task id "
                          f"in {rel_path!r}")
    rep = None
    if design.repetition is not None:
        m = re.search(design.repetition.regex, folders[-1])
        rep = int(m.group("rep")) if m and m.group("rep") and m.group("rep").isdigit() else None
    version_rule = arm.dataset_version or design.dataset_version
    version = None
    if version_rule is not None:
        raw = version_rule.value if version_rule.value is not None else _lookup(record, version_rule.field or "")
        version = None if raw is None else str(raw)
    return Assignment(name, task, rep, version)


def _task_of(rule: TaskRule | None, folders: list[str], task_id: str, task_name: str | None,
             trial_name: str | None) -> str | None:
    if rule is None:
        return task_id
    if rule.folder is not None:
        return folders[-1 - rule.folder] if rule.folder < len(folders) else None
    text = {"task_name": task_name, "trial_name": trial_name, "folder": folders[-1]}[rule.field]
    m = re.search(rule.regex or "", text or "")
    return m.group("task") if m and m.group("task") else None


# --------------------------------------------------------------------------- placing many trials

RERUN_COLUMNS = ["arm", "task_id", "repetition", "trial_path", "started_at", "kept", "rule"]


def _rel(path: str, root_dir: str) -> str:
    prefix = root_dir.rstrip(os.sep) + os.sep
    rel = path[len(prefix):] if path.startswith(prefix) else os.path.relpath(path, root_dir)
    return rel.replace(os.sep, "/")


def apply_design(rows: list[dict[str, Any]], design: StudyDesign, root_dir: str
                 ) -> tuple[list[dict[str, Any]], list[IngestError], list[dict[str, Any]]]:
    """The rows placed by ``design`` (arm in ``profile``), a warning per row left out, and the reruns met.

    A row is a trial as the trials table has it (``profile``, ``task_id``, ``repetition``, ``trial_path``,
    ``started_at``, ``finished_at``, ``run_config`` as JSON, ``task_name``, ``trial_name``, ``source_format``,
    ``mcp_tool_calls``, ``mcp_used``); other keys travel along. Of a trial run more than once (same arm,
    task and repetition), the design's ``reruns`` rule keeps the first, the last, or all of them as further
    repetitions; every rerun is listed with whether it was kept, for the design audit.
    """
    placed: list[dict[str, Any]] = []
    errors: list[IngestError] = []
    for row in rows:
        config = row.get("run_config") or {}
        record = dict(orjson.loads(config) if isinstance(config, str) else config)
        record["profile"] = row["profile"]
        record["source_format"] = row.get("source_format")
        a = assign(design, rel_path=_rel(row["trial_path"], root_dir), task_id=str(row["task_id"]),
                   task_name=row.get("task_name"), trial_name=row.get("trial_name"), record=record)
        if a.arm is None:
            errors.append(IngestError(row["trial_path"], "design", f"{a.problem}; not analysed", "warning"))
            continue
        arm = design.arms[a.arm]
        new = {**row, "profile": a.arm, "task_id": a.task_id}
        if a.repetition is not None:
            new["repetition"] = a.repetition
        if a.dataset_version is not None:
            new["dataset_version"] = a.dataset_version
        if arm.mcp:
            new["mcp_used"] = used_mcp(new.get("mcp_used"), new.get("mcp_tool_calls"))
        placed.append(new)
    kept, reruns = _reruns(placed, design.reruns)
    return kept, errors, reruns


def _reruns(rows: list[dict[str, Any]], rule: str) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Apply the reruns rule to trials sharing (arm, task, repetition); repetition 0 (not known yet) never clashes."""
    groups: dict[tuple, list[int]] = defaultdict(list)
    for i, r in enumerate(rows):
        if r.get("repetition"):
            groups[(r["profile"], r["task_id"], r["repetition"])].append(i)
    drop: set[int] = set()
    renumber: set[tuple] = set()
    listed: list[dict[str, Any]] = []
    for (arm, task, rep), idx in sorted(groups.items(), key=lambda kv: tuple(map(str, kv[0]))):
        if len(idx) < 2:
            continue
        idx.sort(key=lambda i: (str(rows[i].get("started_at") or ""), str(rows[i].get("finished_at") or ""),
                                str(rows[i]["trial_path"])))
        keep = idx[:1] if rule == "first" else idx[-1:] if rule == "last" else idx
        for i in idx:
            if i not in keep:
                drop.add(i)
            listed.append({"arm": arm, "task_id": task, "repetition": rep, "trial_path": rows[i]["trial_path"],
                           "started_at": rows[i].get("started_at"), "kept": i in keep, "rule": rule})
        if rule == "all":
            renumber.add((arm, task))
    out = []
    for i, r in enumerate(rows):
        if i in drop:
            continue
        if (r["profile"], r["task_id"]) in renumber:
            r = {**r, "repetition": 0}  # every attempt is a repetition, numbered by start time
        out.append(r)
    return out, listed


# --------------------------------------------------------------------------- reading a study file


def parse_design(obj: Any, source: str = "<study>") -> StudyDesign:
    """Validate a parsed study file; :class:`DesignError` names the file and the first bad key."""
    if not isinstance(obj, dict):
        raise DesignError(f"{source}: a study file is a mapping (name, arms, ...), got {type(obj).__name__}")
    try:
        return StudyDesign.model_validate(obj)
    except ValidationError as exc:
        err = exc.errors()[0]
        loc = ".".join(str(p) for p in err["loc"]) or "(top)"
        msg = str(err["msg"]).removeprefix("Value error, ")
        if err["type"] == "extra_forbidden":
            msg = "unknown key"
        raise DesignError(f"{source}: {loc}: {msg}") from None


def load_design(path: str | os.PathLike) -> StudyDesign:
    """Read and validate a study file (YAML); one-line :class:`DesignError` on any problem."""
    p = Path(path)
    try:
        text = p.read_bytes().decode("utf-8")
    except FileNotFoundError:
        raise DesignError(f"{p}: study file not found") from None
    except OSError as exc:
        raise DesignError(f"{p}: cannot read the study file ({exc.strerror or exc})") from None
    except UnicodeDecodeError:
        raise DesignError(f"{p}: the study file is not UTF-8 text") from None
    try:
        obj = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise DesignError(f"{p}: not valid YAML ({str(exc).splitlines()[0]})") from None
    return parse_design(obj, str(p))
