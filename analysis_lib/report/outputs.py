"""Where the pipeline notebooks put and find their files: one layout, so notebooks share files, not globals.

All paths are relative to the project root as the notebooks see it (``project_root``, ".." from
``notebooks/``), so executed notebooks and generated files never hold a path of this machine. The file
names are :mod:`analysis_lib.core.outputs`'; the study itself travels as ``analytics/study.json``
(:meth:`analysis_lib.study.study.Study.save`).

The paper pipeline runs the notebooks with ``staging_dir``: they then read and write a staging folder that mirrors
the project (:mod:`analysis_lib.core.output_set`), whose files replace the previous set when the whole run succeeded.
Every path a notebook prints or puts in a TeX comment goes through :meth:`OutputPaths.rel`, which names the place
the file will have, never the staging folder. Run by hand (JupyterLab, nbval), ``staging_dir`` is empty and the
notebooks read and write the folders themselves.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from ..core import outputs as files

__all__ = ["OutputPaths", "output_paths"]


@dataclass(frozen=True)
class OutputPaths:
    """The folders and files one pipeline run writes below ``output_dir``, ``figures_dir`` and ``paper_dir``."""

    root: Path
    output_dir: Path
    figures_dir: Path = Path("figures")
    paper_dir: Path = Path("paper")
    # The staged image of the project root, relative to it (the pipeline's; None: write in place).
    staging_dir: Path | None = None

    def _at(self, rel: Path) -> Path:
        """Where this run writes the folder ``rel`` (relative to the project root)."""
        if self.staging_dir is None:
            return self.root / rel
        return Path(os.path.normpath(self.root / self.staging_dir / rel))

    @property
    def base(self) -> Path:
        return self._at(self.output_dir)

    @property
    def figures(self) -> Path:  # PNG and PDF figures (notebooks 02, 04; the paper includes them)
        return self._at(self.figures_dir)

    @property
    def paper(self) -> Path:  # snippets/ and paper_snippets.md (notebook 05)
        return self._at(self.paper_dir)

    @property
    def analytics(self) -> Path:  # the study and its Layer 1 tables (metrics_detail.csv, design_audit.csv, ...)
        return self.base / files.ANALYTICS_DIR

    @property
    def cache(self) -> Path:  # the per-trial metrics cache: the folder's, in place, never part of a set
        return self.root / self.output_dir / files.ANALYTICS_DIR / ".cache"

    @property
    def study(self) -> Path:  # the study resolved once by notebook 01 (Study.load reads it)
        return self.analytics / files.STUDY

    @property
    def metrics_detail(self) -> Path:
        return self.analytics / files.METRICS_DETAIL

    @property
    def comparisons_dir(self) -> Path:  # statistics: comparisons.csv, comparison_report.md
        return self.base / files.COMPARISONS_DIR

    @property
    def comparisons_csv(self) -> Path:
        return self.comparisons_dir / files.COMPARISONS

    @property
    def llm(self) -> Path:  # Layer 2 judge outputs
        return self.base / files.LLM_DIR

    @property
    def codecanvas(self) -> Path:  # codecanvas_table.csv and the CodeCanvas comparison
        return self.base / files.CODECANVAS_DIR

    @property
    def benchmark(self) -> Path:  # the benchmark plan of notebook 00
        return self.base / files.BENCHMARK_DIR

    def final(self, path: str | Path) -> Path:
        """Where a file this run writes will be once the run's outputs are committed (itself when not staged)."""
        if self.staging_dir is None:
            return Path(path)
        staged = (self.root / self.staging_dir).resolve()
        try:
            inside = Path(path).resolve().relative_to(staged)
        except ValueError:
            return Path(path)
        return Path(os.path.normpath(self.root / inside))

    def rel(self, path: str | Path) -> str:
        """``path`` relative to the project root, with forward slashes, for display and TeX comments: the place the
        file has once the run is committed, never the staging folder."""
        try:
            return self.final(path).resolve().relative_to(self.root.resolve()).as_posix()
        except ValueError:
            return Path(path).name


def output_paths(project_root: str | Path, output_dir: str | Path, *, figures_dir: str | Path = "figures",
                 paper_dir: str | Path = "paper", staging_dir: str | Path = "") -> OutputPaths:
    """The layout for ``output_dir``, ``figures_dir`` and ``paper_dir`` (relative to ``project_root``), written into
    ``staging_dir`` (the staged image of the project root, relative to it) when the pipeline gives one."""
    return OutputPaths(Path(project_root), Path(output_dir), Path(figures_dir), Path(paper_dir),
                       Path(staging_dir) if staging_dir else None)
