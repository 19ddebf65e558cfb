"""Where the pipeline notebooks put and find their files: one layout, so notebooks share files, not globals.

All paths are relative to the project root as the notebooks see it (``project_root``, ".." from
``notebooks/``), so executed notebooks and generated files never hold a path of this machine. The file
names are :mod:`analysis_lib.core.outputs`'; the study itself travels as ``analytics/study.json``
(:meth:`analysis_lib.study.study.Study.save`).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ..core import outputs as files

__all__ = ["OutputPaths", "output_paths"]


@dataclass(frozen=True)
class OutputPaths:
    """The folders and files one pipeline run writes below ``output_dir``."""

    root: Path
    output_dir: Path

    @property
    def base(self) -> Path:
        return self.root / self.output_dir

    @property
    def analytics(self) -> Path:  # the study and its Layer 1 tables (metrics_detail.csv, design_audit.csv, ...)
        return self.base / files.ANALYTICS_DIR

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

    def rel(self, path: str | Path) -> str:
        """``path`` relative to the project root, with forward slashes, for display and TeX comments."""
        try:
            return Path(path).resolve().relative_to(self.root.resolve()).as_posix()
        except ValueError:
            return Path(path).name


def output_paths(project_root: str | Path, output_dir: str | Path) -> OutputPaths:
    """The layout for ``output_dir`` (relative to ``project_root``)."""
    return OutputPaths(Path(project_root), Path(output_dir))
