"""``python -m analysis_lib meta STUDY_OUTPUT... --metric M [--scale S] -o OUT``: one effect pooled across studies.

Each STUDY_OUTPUT is the output folder of an analysed study (its ``comparisons.csv``, written by the main
command). The planned comparison of ``--metric`` in each (one per study: the sensitivity tier's restatements are
not pooled) is pooled with the random-effects machinery of :mod:`analysis_lib.inference.pooling`; the studies
must estimate the same quantity on the same scale, else the command refuses with one line and exit code 2.
Writes ``pooled_<metric>.csv`` (REML with the HKSJ interval, Paule-Mandel, DerSimonian-Laird for comparison; the
heterogeneity and the prediction interval), ``pooled_<metric>_studies.csv`` (each study's estimate, standard
error and weight) and the forest plot ``forest_pooled_<metric>.png``/``.pdf`` into OUT, all written atomically.
A study folder that cannot be read is one line on stderr and is left out; the rest are pooled.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

import pandas as pd

from ..core import output_set
from ..core import outputs as files
from ..core.fileio import atomic_write_csv, read_json
from ..core.trial import InputError
from ..inference.pooling import PI_NOTE, POOLING_SCALES, PoolingError, pool_comparisons
from ..report import figures

COMPARISONS = files.COMPARISONS


def study_name(folder: Path) -> str:
    """What a study is called: its study file's data source (the study's ``study.json``), else the study file's
    name, else the folder."""
    path = folder / files.STUDY
    if path.is_file():
        try:
            record = read_json(path, "meta") or {}
        except InputError:
            record = {}
        design = record.get("design") if isinstance(record.get("design"), dict) else {}
        source = record.get("data_source") if isinstance(record.get("data_source"), dict) else {}
        for name in (source.get("name"), design.get("name")):
            if isinstance(name, str) and name.strip():
                return name.strip()
    return folder.resolve().name


def study_simulated(folder: Path) -> bool:
    """Whether an analysed study was made from simulated runs (its ``metrics_detail.csv`` says so, row by row)."""
    path = folder / files.METRICS_DETAIL
    try:
        col = pd.read_csv(path, usecols=["simulated"])["simulated"]
    except (OSError, ValueError):
        return False
    return bool(col.astype(str).str.lower().isin({"true", "1"}).any())


def study_confidence(folder: Path) -> float | None:
    """The confidence level of a study's intervals, from the plan recorded beside them (``analysis_plan.json``)."""
    path = folder / files.PLAN_SIDECAR
    if not path.is_file():
        return None
    try:
        doc = read_json(path, "meta")
        value = doc["plan"]["bootstrap"]["confidence"]
    except (InputError, KeyError, TypeError):
        return None
    return float(value) if isinstance(value, (int, float)) else None


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m analysis_lib meta",
        description="Pool one metric's effect across several analysed studies (their comparisons.csv) with a "
                    "random-effects model: REML with the Hartung-Knapp-Sidik-Jonkman interval, heterogeneity "
                    "(tau^2, I^2, Q) and the prediction interval for a new study, and a forest plot.",
    )
    p.add_argument("studies", nargs="+", metavar="STUDY_OUTPUT", help="output folders of analysed studies")
    p.add_argument("--metric", required=True, help="the metric whose effect is pooled (a metric id, e.g. success)")
    p.add_argument("--scale", choices=POOLING_SCALES,
                   help="the scale the effect is pooled on (default: the comparisons' own); refused if they differ")
    p.add_argument("-o", "--output", required=True, metavar="OUT", help="folder for the pooled table and figure")
    return p


def _rows(folders: list[Path], metric: str) -> tuple[pd.DataFrame, list[str], dict[str, Path]]:
    """Every study's comparison rows of ``metric`` (column ``study``), the error lines met, and study -> folder."""
    frames, errors, names = [], [], {}
    for folder in folders:
        path = folder / COMPARISONS
        if (folder / files.OUTPUT_MANIFEST).exists() or (folder / files.STAGING_DIR).exists():
            # An output set is read only when it is complete and unchanged, and only for the files it holds.
            try:
                manifest = output_set.check_set(folder, label=str(folder), command="meta")
            except output_set.OutputSetError as exc:
                errors.append(f"error: {exc}; left out")
                continue
            if COMPARISONS not in manifest.files:
                errors.append(f"error: {folder}: its set ({manifest.line()}) holds no {COMPARISONS} (that analysis "
                              "compared nothing); left out")
                continue
        elif not path.is_file():
            errors.append(f"error: {path}: no {COMPARISONS} (analyse the study first: python -m analysis_lib RUNS -o "
                          f"{folder}); left out")
            continue
        try:
            rows = pd.read_csv(path)
        except (OSError, ValueError, UnicodeDecodeError) as exc:
            errors.append(f"error: {path}: unreadable ({type(exc).__name__}: {str(exc).splitlines()[0][:120]}); left out")
            continue
        missing = {"metric", "estimate", "ci_low", "ci_high", "scale", "estimand", "n_pairs"} - set(rows.columns)
        if missing:
            errors.append(f"error: {path}: not a comparisons table (no {', '.join(sorted(missing))}); left out")
            continue
        name = study_name(folder)
        if name in names:  # two studies of one source: the folders tell them apart
            name = f"{name} ({folder.resolve().name})"
        names[name] = folder
        planned = rows[(rows["metric"] == metric) & (rows.get("tier", pd.Series("", index=rows.index)) != "sensitivity")]
        if len(planned) > 1 and {"profile_a", "profile_b"} <= set(planned.columns):
            pairs = ", ".join(f"{b} vs {a}" for a, b in zip(planned["profile_a"], planned["profile_b"], strict=True))
            raise PoolingError(f"{path}: {len(planned)} comparisons of {metric} ({pairs}); pooling needs one per study "
                               "(analyse it with --compare A B)")
        frames.append(rows.assign(study=name))
    return (pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()), errors, names


def cli(argv: list[str] | None = None) -> int:
    """Pool and write; 0 when pooled, 1 when fewer than two studies could be read, 2 when the studies cannot be
    pooled (different estimands or scales, two comparisons in one study)."""
    args = build_parser().parse_args(argv)
    folders = [Path(s) for s in args.studies]
    try:
        rows, errors, names = _rows(folders, args.metric)
    except PoolingError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    for line in errors:
        print(line, file=sys.stderr)
    if len(names) < 2:
        print(f"error: pooling needs at least 2 analysed studies, {len(names)} could be read", file=sys.stderr)
        return 1
    levels = {c for c in (study_confidence(names[n]) for n in names) if c is not None}
    if len(levels) > 1:
        print(f"error: the studies' intervals are at different confidence levels ({sorted(levels)}); they cannot be "
              "pooled as they are", file=sys.stderr)
        return 2
    confidence = levels.pop() if levels else 0.95
    try:
        pooled = pool_comparisons(rows, args.metric, scale=args.scale, by="study", confidence=confidence)
    except PoolingError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    simulated = any(study_simulated(f) for f in names.values())
    out = Path(args.output)
    os.makedirs(out, exist_ok=True)
    stem = f"pooled_{args.metric}"
    atomic_write_csv(out / f"{stem}.csv", pooled.methods.assign(prediction_note=PI_NOTE, simulated=simulated),
                     index=False)
    effects = pooled.effects.rename(columns={"label": "study"}).assign(
        folder=[os.path.relpath(names[n], out) for n in pooled.effects["label"]], simulated=simulated)
    atomic_write_csv(out / f"{stem}_studies.csv", effects, index=False)
    fig = figures.plot_pooled_forest(pooled, simulated, what="studies")
    figures.save_figure(fig, out, f"forest_{stem}")
    figures.plt.close(fig)
    for line in pooled.excluded:
        print(f"warning: {line}; left out of the pooling", file=sys.stderr)
    p = pooled.primary
    k = 100.0 if pooled.comparison_scale in ("rate", "pass_rate") else 1.0
    unit = "pp" if k == 100.0 else "%" if pooled.scale == "log_ratio" else pooled.unit
    prefix = "SIMULATED studies: " if simulated else ""
    print(f"{prefix}{pooled.label} pooled over {pooled.k} studies ({', '.join(pooled.effects['label'])}): "
          f"{k * p['estimate']:+.2f} {unit} [{k * p['ci_low']:+.2f}, {k * p['ci_high']:+.2f}] (REML, HKSJ "
          f"t on {int(p['df'])} df, p = {p['p_value']:.3g}); tau^2 = {p['tau2']:.4g}, I^2 = {100 * p['I2']:.0f} % "
          f"[{100 * p['I2_low']:.0f}, {100 * p['I2_high']:.0f}], Q = {p['Q']:.3g} (p = {p['Q_p']:.3g}); "
          f"{pooled.confidence:.0%} prediction interval [{k * p['pi_low']:+.2f}, {k * p['pi_high']:+.2f}]; "
          f"outputs in {out}")
    return 0
