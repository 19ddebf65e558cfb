"""Where the pipeline notebooks put and find their files: one layout, so notebooks share files, not globals.

All paths are relative to the project root as the notebooks see it (``project_root``, ".." from
``notebooks/``), so executed notebooks and generated files never hold a path of this machine.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..core.fileio import atomic_write_json, read_json

__all__ = ["OutputPaths", "output_paths", "write_run_info", "read_run_info"]


@dataclass(frozen=True)
class OutputPaths:
    """The folders and files one pipeline run writes below ``output_dir``."""

    root: Path
    output_dir: Path

    @property
    def base(self) -> Path:
        return self.root / self.output_dir

    @property
    def analytics(self) -> Path:  # Layer 1: metrics_detail.csv, metrics_summary.csv, aggregate_metrics.json, errors.csv
        return self.base / "analytics"

    @property
    def metrics_detail(self) -> Path:
        return self.analytics / "metrics_detail.csv"

    @property
    def comparisons_dir(self) -> Path:  # statistics: comparisons.csv, comparison_report.md
        return self.base / "comparisons"

    @property
    def comparisons_csv(self) -> Path:
        return self.comparisons_dir / "comparisons.csv"

    @property
    def llm(self) -> Path:  # Layer 2 judge outputs
        return self.base / "llm"

    @property
    def codecanvas(self) -> Path:  # codecanvas_table.csv and the CodeCanvas comparison
        return self.base / "codecanvas"

    @property
    def benchmark(self) -> Path:  # the benchmark plan of notebook 00
        return self.base / "benchmark"

    @property
    def run_info(self) -> Path:  # what 01 learned about the runs (simulated?, seed, baseline)
        return self.base / "run_info.json"

    def rel(self, path: str | Path) -> str:
        """``path`` relative to the project root, with forward slashes, for display and TeX comments."""
        try:
            return Path(path).resolve().relative_to(self.root.resolve()).as_posix()
        except ValueError:
            return Path(path).name


def output_paths(project_root: str | Path, output_dir: str | Path) -> OutputPaths:
    """The layout for ``output_dir`` (relative to ``project_root``)."""
    return OutputPaths(Path(project_root), Path(output_dir))


def write_run_info(paths: OutputPaths, info: dict[str, Any]) -> Path:
    """Record facts about the analysed runs for the later notebooks (atomic JSON, sorted keys)."""
    return atomic_write_json(paths.run_info, info)


def read_run_info(paths: OutputPaths) -> dict[str, Any]:
    """Read ``run_info.json``; a clear error when notebook 01 has not run yet."""
    if not paths.run_info.exists():
        raise FileNotFoundError(f"{paths.rel(paths.run_info)} is missing: run notebooks/01_metrics.ipynb first")
    return read_json(paths.run_info)
