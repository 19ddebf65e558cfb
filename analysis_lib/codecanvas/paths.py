"""Matching the paths an agent wrote (edits, failing tests) to CodeCanvas ``symbol_files``.

Container paths (``/app/src/a.py``), ``./`` prefixes and working-folder-relative paths name the
same files; the rule is :class:`PathMatcher`'s.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Iterable

from ..core.tools import files_touched
from ..core.trial import Trial
from .state import CanvasState


def normalize_path(path: str) -> str:
    """Lexically normalised posix path: backslashes to ``/``, ``./`` and ``x/..`` removed."""
    p = path.strip().replace("\\", "/")
    if not p:
        return ""
    p = posixpath.normpath(p)
    while p.startswith("./"):
        p = p[2:]
    return "" if p == "." else p


def _parts(path: str) -> tuple[str, ...]:
    return tuple(x for x in path.split("/") if x)


class PathMatcher:
    """Maps a path as the agent wrote it to the canonical ``symbol_files`` path it names.

    Rule (documented because container and host paths differ): both sides are normalised
    (:func:`normalize_path`). A path names a symbol file when their path components are equal,
    or when one is a component-wise suffix of the other and the shorter one is relative (a
    relative path is relative to an unknown working folder; ``/app/src/a.py`` names
    ``src/a.py``; ``a.py`` names ``src/pkg/a.py`` when the agent worked inside ``src/pkg``). Two
    absolute paths must be equal. Among several candidates the longest shared suffix wins; a
    tie is ambiguous and matches nothing. Unmatched paths keep their normalised form.
    """

    def __init__(self, symbol_paths: Iterable[str]):
        canon: dict[str, str] = {}
        raw = sorted({normalize_path(p) for p in symbol_paths if p and normalize_path(p)})
        rel = [p for p in raw if not p.startswith("/")]
        for p in rel:
            canon[p] = p
        # Candidates share the file name: bucket by it so that states with thousands of symbol
        # files stay linear.
        rel_by_name: dict[str, list[str]] = {}
        for p in rel:
            rel_by_name.setdefault(posixpath.basename(p), []).append(p)
        # An absolute symbol path that ends with a relative one is the same file seen from the
        # container: fold it onto the relative form so that both count once.
        for p in raw:
            if p.startswith("/"):
                canon[p] = self._best(p, rel_by_name.get(posixpath.basename(p), [])) or p
        self._canon = canon
        self._by_name: dict[str, list[str]] = {}
        for p in canon:
            self._by_name.setdefault(posixpath.basename(p), []).append(p)
        self._files = sorted(set(canon.values()))

    @staticmethod
    def _candidates(path: str, candidates: Iterable[str]) -> list[str]:
        """The candidates sharing the longest component suffix with ``path`` under the rule."""
        pp = _parts(path)
        p_abs = path.startswith("/")
        best: list[str] = []
        best_len = 0
        for c in candidates:
            cp = _parts(c)
            c_abs = c.startswith("/")
            n = min(len(pp), len(cp))
            if n == 0 or pp[-n:] != cp[-n:]:
                continue
            if len(pp) == len(cp):
                if p_abs and c_abs and pp != cp:
                    continue
            elif (p_abs if len(pp) < len(cp) else c_abs):
                continue  # the shorter path is absolute: a different file
            if n > best_len:
                best, best_len = [c], n
            elif n == best_len:
                best.append(c)
        return best

    @classmethod
    def _best(cls, path: str, candidates: Iterable[str]) -> str | None:
        best = cls._candidates(path, candidates)
        return best[0] if len(set(best)) == 1 else None

    def canonical(self, path: str) -> str:
        """The symbol-file path that ``path`` names, else ``path`` normalised."""
        norm = normalize_path(path)
        if not norm:
            return norm
        if norm in self._canon:
            return self._canon[norm]
        hits = {self._canon[c] for c in self._candidates(norm, self._by_name.get(posixpath.basename(norm), []))}
        return hits.pop() if len(hits) == 1 else norm

    @property
    def files(self) -> list[str]:
        """The canonical symbol-file paths."""
        return self._files

    def symbol_file(self, raw: str) -> str:
        """Canonical form of a ``symbol_files`` value."""
        return self._canon.get(normalize_path(raw), normalize_path(raw))


def edited_paths(trial: Trial) -> list[str]:
    """Every path the trajectory's edit calls wrote, as written (duplicates and order kept).

    Edits come from the tool taxonomy (:func:`analysis_lib.core.tools.files_touched`): edit tools'
    path arguments and shell edits (``sed -i``, redirections, ``tee``, patches).
    """
    out: list[str] = []
    if trial.trajectory is None:
        return out
    for step in trial.trajectory.steps:
        for call in step.tool_calls:
            _read, edited = files_touched(call.name, call.arguments if isinstance(call.arguments, dict) else {})
            out += [p for p in edited if isinstance(p, str)]
    return out


_NODE_FILE = re.compile(r"^([^\s:\[]+\.py)(?:::|$)")


def file_of_test(test) -> str | None:
    """The file a test lives in: its ``file_path``, else the module part of a pytest node id."""
    if getattr(test, "file_path", None):
        return str(test.file_path)
    m = _NODE_FILE.match(str(getattr(test, "name", "") or ""))
    return m.group(1) if m else None


def _tested_module(path: str) -> str | None:
    """``test_x.py`` / ``x_test.py`` -> ``x.py`` (pytest's naming convention)."""
    base = posixpath.basename(path)
    m = re.fullmatch(r"test_(.+)\.py", base) or re.fullmatch(r"(.+)_test\.py", base)
    return f"{m.group(1)}.py" if m else None


def _name_tokens(test) -> set[str]:
    """Lower-case words of a test's function name (``test_retries_pagination[2]`` -> retries, pagination, 2)."""
    func = str(getattr(test, "name", "") or "").split("::")[-1]
    func = re.sub(r"\[.*\]$", "", func)
    return {t.lower() for t in re.split(r"[^A-Za-z0-9]+|_", func) if t} - {"test", "tests"}


def blast_radius_names(state: CanvasState, blast_files: set[str]) -> set[str]:
    """Module names (file stems) of the blast-radius files and short names of its symbols."""
    names = {posixpath.splitext(posixpath.basename(f))[0].lower() for f in blast_files}
    for a in state.analyses:
        for sid in ([a.target] if a.target else []) + a.affected:
            names.add(re.split(r"[.:/#]", sid)[-1].lower())
    return names - {"", "__init__", "test", "tests"}


def failed_test_in_blast_radius(test, blast_files: set[str], matcher: PathMatcher, blast_names: set[str] = frozenset()) -> bool:
    """Whether a failed test falls in the blast radius (the first rule that applies decides).

    1. The test's file (:func:`file_of_test`: ``file_path``, else the node id's module part),
       matched through ``symbol_files`` (:class:`PathMatcher`), is a blast-radius file.
    2. pytest's naming convention: the file is ``test_<m>.py`` / ``<m>_test.py`` and a
       blast-radius file is ``<m>.py``.
    3. The test's name: a word of its function name (split on ``_``, parameters dropped) is the
       module name of a blast-radius file or the short name of a blast-radius symbol
       (``blast_names``, see :func:`blast_radius_names`). Harbor tasks keep every test in one
       ``test_outputs.py``, so there the name is the only link to the code.
    A test that matches none is outside.
    """
    path = file_of_test(test)
    if path:
        canon = matcher.canonical(path)
        if canon in blast_files:
            return True
        module = _tested_module(canon)
        if module is not None and any(posixpath.basename(f) == module for f in blast_files):
            return True
    return bool(blast_names and _name_tokens(test) & blast_names)


def blast_radius_files(state: CanvasState, matcher: PathMatcher | None = None) -> set[str]:
    """Canonical files of every analysis' target and affected symbols (through symbol_files)."""
    matcher = matcher or PathMatcher(state.symbol_files.values())
    files: set[str] = set()
    for a in state.analyses:
        for sid in ([a.target] if a.target else []) + a.affected:
            fp = state.symbol_files.get(sid)
            if fp:
                files.add(matcher.symbol_file(fp))
    return files


def distinct_files(paths: Iterable[str], matcher: PathMatcher) -> set[str]:
    """Distinct canonical files of ``paths``: matched through symbol_files, and the unmatched
    ones folded onto each other by the same suffix rule (``/app/x.py`` and ``x.py`` are one file)."""
    canon = {matcher.canonical(p) for p in paths} - {""}
    unmatched = sorted(canon - set(matcher.files))
    relative = [p for p in unmatched if not p.startswith("/")]
    for p in unmatched:
        if p.startswith("/"):
            hit = PathMatcher._best(p, relative)
            if hit is not None:
                canon.discard(p)
                canon.add(hit)
    return canon
