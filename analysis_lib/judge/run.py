"""Layer 2 entry point: plan the judgements, ask them, write the outputs atomically.

``run_layer2(trials, metrics, out_dir, options)`` is what ``python -m analysis_lib`` calls;
``load_layer2_outputs(out_dir)`` is what the notebooks read. Outputs (in ``out_dir``):
``strategy_analysis.json``, ``failure_analyses.json``, ``mcp_utilization.json``,
``comparative_narratives.md``, ``synthesis.md``, ``paper_snippets.md``, ``judge_agreement.md``
(with --judge-samples > 1, --judge-model-b or --human-labels) and ``layer2_summary.json`` (the run
log: requests, cache hits, spend of this run). All but the run log are identical when a run is
repeated from the cache.
"""

from __future__ import annotations

import asyncio
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import litellm
import pandas as pd
from dotenv import find_dotenv, load_dotenv
from tqdm.auto import tqdm

from ..core import outputs as files
from ..core.fileio import atomic_write_json, atomic_write_text, read_json
from ..core.tools import DEFAULT_MCP_TOOLS
from ..core.trial import InputError, Trial
from ..metrics.trial_metrics import metrics_frame
from ..metrics.trials_table import ACTIONS_COLUMN, trial_row
from . import DEFAULT_MODEL
from .agreement import agreement_row, confusion_matrix, format_agreement_md, format_confusion_md, majority_label, self_agreement_row
from .analyses import Job, blind_job, comparative_jobs, failure_jobs, mcp_jobs, metrics_lookup, strategy_jobs, synthesis_job
from .blind import unblind as unblind_value
from .blind import vocabulary
from .cache import ResponseCache, default_cache_dir
from .client import JudgeClient, JudgeResult, Ledger, run_sync
from .estimate import estimate_jobs, format_estimate, total_row
from .labels import load_human_labels_csv
from .ppi import arm_contrasts, format_contrasts_md
from .schemas import LABEL_FIELDS
from .templates import load_template

SIMULATED_NOTICE = "SIMULATED DATA: these analyses describe runs made by the seeded simulator, not real agents."

JSON_OUTPUTS = {"strategy": "strategy_analysis.json", "failure": "failure_analyses.json", "mcp": "mcp_utilization.json"}
MD_OUTPUTS = {
    "comparative": "comparative_narratives.md",
    "synthesis": "synthesis.md",
    "paper_snippets": files.PAPER_SNIPPETS,
    "agreement": "judge_agreement.md",
    "contrasts": "judge_contrasts.md",
}
# Below this many units a percentile bootstrap of an agreement coefficient under-covers; the report says so.
FEW_UNITS = 30
SUMMARY_FILE = "layer2_summary.json"
ESTIMATE_FILE = "llm_cost_estimate.json"
# Exit code of the analysis when some LLM judgements failed (the rest was written; they are failed records).
JUDGEMENTS_FAILED_EXIT = 3


@dataclass
class Layer2Options:
    """The options run_layer2 reads from the CLI's argparse Namespace (missing ones take defaults)."""

    model: str = DEFAULT_MODEL
    api_base: str | None = None
    budget_usd: float | None = None
    concurrency: int = 4
    refresh: bool = False
    judge_samples: int = 1
    judge_model_b: str | None = None
    human_labels: str | None = None
    estimate_cost: bool = False
    quiet: bool = False
    seed: int = 0
    simulated: bool = False
    baseline: str | None = None
    # The (A, B) arm pairs the study compares (Study.pairs: each configuration's treatment against its control); the
    # judge's contrasts follow them. None: every arm against ``baseline``.
    pairs: list[tuple[str, str]] | None = None
    mcp_tools: list[str] | None = None
    cache_dir: str | None = None  # LLM response cache (default: the shared one, see cache.default_cache_dir)
    judge_temperature: float = 0.0  # every one of the K samples is drawn at this temperature
    blind: bool = True  # hide profile, MCP server and MCP tool names from the judge
    unblind: list[str] | None = None  # analyses that see the real names, e.g. ["mcp"]
    shuffle_classes: bool = True  # seeded order of the class list per judgement
    bootstrap_reps: int = 1000  # bootstrap resamples for the agreement intervals
    max_chars: int = 12_000  # condensed trajectory budget per prompt
    max_tokens: int = 2048  # answer length cap per call (it bounds each call's reserve against the budget)
    judge_deadline: float = 300.0  # seconds one request may take in all, answered or not
    max_string_chars: int | None = None  # maxLength sent for free strings (small local models)
    max_list_items: int | None = None  # lower maxItems sent for lists (small local models)

    @classmethod
    def from_namespace(cls, ns: Any) -> Layer2Options:
        kw = {}
        for name in cls.__dataclass_fields__:
            v = getattr(ns, name, None)
            if v is not None:
                kw[name] = v
        # The CLI's --cache-dir is the metrics cache; the LLM cache has its own attribute name.
        kw.pop("cache_dir", None)
        if getattr(ns, "llm_cache_dir", None):
            kw["cache_dir"] = ns.llm_cache_dir
        if getattr(ns, "no_blind", False):
            kw["blind"] = False
        if getattr(ns, "unblind_mcp", False):
            kw["unblind"] = sorted(set(kw.get("unblind") or []) | {"mcp"})
        if getattr(ns, "no_shuffle_classes", False):
            kw["shuffle_classes"] = False
        opts = cls(**kw)
        if not opts.model:
            opts.model = DEFAULT_MODEL
        if opts.judge_samples < 1:
            raise ValueError(f"judge_samples must be >= 1, got {opts.judge_samples}")
        if opts.concurrency < 1:
            raise ValueError(f"concurrency must be >= 1, got {opts.concurrency}")
        return opts


def _say(msg: str) -> None:
    print(msg, file=sys.stderr)


def load_env_file() -> None:
    """Read the project's ``.env`` (found from the working directory upwards) without overriding the environment."""
    path = find_dotenv(usecwd=True)
    if path:
        load_dotenv(path, override=False)


def missing_key_reason(model: str) -> str | None:
    """None when litellm finds the key(s) ``model`` needs in the environment, else a one-line reason."""
    try:
        env = litellm.validate_environment(model=model)
    except Exception as exc:  # an unknown provider: let the call itself say what is wrong
        return f"cannot tell which API key {model} needs ({type(exc).__name__})"
    if env.get("keys_in_environment"):
        return None
    missing = ", ".join(env.get("missing_keys") or []) or "an API key"
    return f"no API key for {model} (set {missing} in the environment or .env, or pass --api-base for a local server)"


def verdict_table(trials: list[Trial], metrics: pd.DataFrame | None) -> pd.DataFrame:
    """The study's trials table the judge reads verdicts from; without one (loaded trials alone), the trials measured
    here, scored by the default success rule (:func:`analysis_lib.core.success.reward_succeeds`)."""
    if metrics is not None:
        return metrics
    # Rows of the trials as they are named (no renumbering of repetitions), so that each row finds its trial.
    return metrics_frame([trial_row(t) for t in trials], sort=False).drop(columns=[ACTIONS_COLUMN], errors="ignore")


def plan_jobs(trials: list[Trial], metrics: pd.DataFrame | None, opts: Layer2Options) -> list[Job]:
    """Every per-trial and per-task judgement (the synthesis comes after, from their results)."""
    lookup = metrics_lookup(verdict_table(trials, metrics))
    mcp_kw = {"mcp_tools": set(DEFAULT_MCP_TOOLS) | set(opts.mcp_tools)} if opts.mcp_tools else {}
    vocab = vocabulary(trials, **mcp_kw) if opts.blind else None
    unblind = set(opts.unblind or [])
    unknown = unblind - {"strategy", "failure", "mcp", "comparative"}
    if unknown:
        raise ValueError(f"unblind names unknown analyses: {', '.join(sorted(unknown))}")
    per_trial = (
        strategy_jobs(trials, lookup, opts.max_chars, opts.seed, opts.shuffle_classes)
        + failure_jobs(trials, lookup, opts.max_chars, opts.seed, opts.shuffle_classes)
        + mcp_jobs(trials, lookup, opts.max_chars, **mcp_kw)
    )
    if vocab is not None:
        per_trial = [j if j.analysis in unblind else blind_job(j, vocab) for j in per_trial]
    comp_vocab = None if "comparative" in unblind else vocab
    return per_trial + comparative_jobs(trials, lookup, opts.max_chars + opts.max_chars // 3, comp_vocab, opts.seed)


def condensation_report(jobs: list[Job]) -> dict[str, Any]:
    """Total naive vs condensed characters over the distinct trajectories the prompts show."""
    seen: dict[int, Any] = {}
    for job in jobs:
        if job.analysis == "strategy":
            for c in job.condensed:
                seen[id(c)] = c
    naive = sum(c.naive_chars for c in seen.values())
    condensed = sum(c.condensed_chars for c in seen.values())
    return {"trajectories": len(seen), "naive_chars": naive, "condensed_chars": condensed, "ratio": round(condensed / naive, 4) if naive else None}


def run_layer2(trials: list[Trial], metrics: pd.DataFrame, out_dir: Path, options: Any) -> dict:
    """Run the Layer 2 analyses (or estimate their cost) and write their outputs into ``out_dir``.

    Returns a summary: requests sent, cache hits, spend (and the reserves held against the budget),
    judgements not asked because of the budget, failed judgements (``judgements_failed``, each with its
    reason in ``failed_analyses``), and ``skipped`` (a reason) when nothing could be asked. Raises
    ``ValueError`` when a budget cannot be kept (the judge model has no price).
    """
    opts = options if isinstance(options, Layer2Options) else Layer2Options.from_namespace(options)
    out_dir = Path(out_dir)
    metrics = verdict_table(trials, metrics)
    jobs = plan_jobs(trials, metrics, opts)
    lookup = metrics_lookup(metrics)
    report = condensation_report(jobs)
    summary: dict[str, Any] = {
        "model": opts.model,
        "judge_model_b": opts.judge_model_b,
        "baseline": opts.baseline,
        "simulated": bool(opts.simulated),
        "seed": opts.seed,
        "judgements_planned": len(jobs) * opts.judge_samples + 1,
        "requests": 0,
        "cache_hits": 0,
        "spent_usd": 0.0,
        "spend_complete": True,
        "budget_usd": opts.budget_usd,
        "budget_stopped": 0,
        "judgements_failed": 0,
        "failed_analyses": [],
        "skipped": None,
        "condensation": report,
        "outputs": [],
    }

    if opts.estimate_cost:
        syn = synthesis_job(trials, lookup, {}, opts.baseline, opts.simulated)
        rows = estimate_jobs(jobs, opts.model, opts.judge_samples) + estimate_jobs([syn], opts.model)
        text = format_estimate(rows, opts.model)
        est = {"model": opts.model, "baseline": opts.baseline, "rows": [r.__dict__ for r in rows],
               "total": total_row(rows).__dict__}
        if opts.judge_model_b:
            rows_b = estimate_jobs(jobs, opts.judge_model_b)
            text += "\n\n" + format_estimate(rows_b, opts.judge_model_b)
            est["model_b"] = {"model": opts.judge_model_b, "rows": [r.__dict__ for r in rows_b], "total": total_row(rows_b).__dict__}
        print(text)
        atomic_write_json(out_dir / ESTIMATE_FILE, est)
        summary.update(estimate=est, outputs=[ESTIMATE_FILE])
        return summary

    load_env_file()
    api_key = None
    if opts.api_base:
        # Local servers ignore the key, but the OpenAI client insists on one.
        api_key = None if missing_key_reason(opts.model) is None else "no-key"
    else:
        reason = missing_key_reason(opts.model)
        if reason is None and opts.judge_model_b:
            reason = missing_key_reason(opts.judge_model_b)
        if reason is not None:
            summary["skipped"] = f"Layer 2 skipped: {reason}"
            _say(summary["skipped"])
            summary["outputs"] = [SUMMARY_FILE]
            atomic_write_json(out_dir / SUMMARY_FILE, summary)
            return summary

    human: dict[tuple[str, str], str] = {}
    if opts.human_labels:
        try:
            human = load_human_labels_csv(opts.human_labels)
        except InputError as exc:
            _say(f"human labels ignored: {exc}")

    ledger = Ledger(budget_usd=opts.budget_usd)
    cache = ResponseCache(opts.cache_dir or default_cache_dir())
    k = opts.judge_samples
    common = dict(
        max_tokens=opts.max_tokens,
        max_string_chars=opts.max_string_chars,
        max_list_items=opts.max_list_items,
        api_base=opts.api_base,
        api_key=api_key,
        cache=cache,
        ledger=ledger,
        concurrency=opts.concurrency,
        refresh=opts.refresh,
        seed=opts.seed,
        deadline=opts.judge_deadline,
    )
    # All K samples at one temperature: the self-agreement then describes the judge that gave the
    # reported (majority) label. At temperature 0 samples differ only by their seed.
    client = JudgeClient(opts.model, temperature=opts.judge_temperature, **common)
    client_b = JudgeClient(opts.judge_model_b, temperature=opts.judge_temperature, **common) if opts.judge_model_b else None

    bar = tqdm(total=len(jobs) * (k + (1 if client_b else 0)) + 1, desc="LLM analyses", disable=opts.quiet, file=sys.stderr)

    async def ask(c: JudgeClient, job: Job, sample: int) -> JudgeResult:
        r = await c.judge(job.template, job.variables, job.schema, sample)
        bar.update(1)
        return r

    async def phase1() -> tuple[list[list[JudgeResult]], list[JudgeResult | None]]:
        sem = asyncio.Semaphore(opts.concurrency)  # one bound over both judge models
        client._sem = sem
        if client_b:
            client_b._sem = sem
        a = [asyncio.gather(*(ask(client, j, s) for s in range(k))) for j in jobs]
        b = [ask(client_b, j, 0) for j in jobs] if client_b else []
        res = await asyncio.gather(asyncio.gather(*a), asyncio.gather(*b))
        res_a = [list(x) for x in res[0]]
        res_b = list(res[1]) if client_b else [None] * len(jobs)
        return res_a, res_b

    results_a, results_b = run_sync(phase1)

    records: dict[str, list[dict[str, Any]]] = {"strategy": [], "failure": [], "mcp": [], "comparative": []}
    costs: dict[str, list[float | None]] = {name: [] for name in [*records, "synthesis"]}
    for job, rs, rb in zip(jobs, results_a, results_b, strict=True):
        label_field = LABEL_FIELDS.get(job.analysis)
        labels = [unblind_value((r.data or {}).get(label_field), job.mapping or {}) if r.ok else None for r in rs]
        _, pick = majority_label(labels) if label_field else (None, 0)
        first = rs[max(pick, 0)]  # the reported answer: the first sample giving the majority label
        data = unblind_value(first.data, job.mapping) if job.mapping and first.data else first.data
        rec = {**job.identity, "ok": first.ok, "result": data, "error": first.error, "repaired": first.repaired, "cost_usd": first.cost_usd}
        rec["blinded"] = job.mapping is not None
        if job.class_order:
            rec["class_order"] = job.class_order
        if k > 1:
            rec["samples"] = [{"ok": r.ok, "label": lab, "error": r.error} for r, lab in zip(rs, labels, strict=True)]
        if rb is not None:
            data_b = unblind_value(rb.data, job.mapping) if job.mapping and rb.data else rb.data
            rec["model_b"] = {"model": client_b.model, "ok": rb.ok, "result": data_b, "error": rb.error, "cost_usd": rb.cost_usd}
        records[job.analysis].append(rec)
        costs[job.analysis].extend([r.cost_usd for r in rs if not r.skipped] + ([rb.cost_usd] if rb is not None and not rb.skipped else []))
        for r in [*rs, *([rb] if rb is not None else [])]:
            if not r.ok:
                summary["failed_analyses"].append({"analysis": job.analysis, "unit": job.unit_id, "model": r.model, "error": r.error})
                summary["judgements_failed"] += not r.skipped

    syn_job = synthesis_job(trials, lookup, records, opts.baseline, opts.simulated)

    async def phase2() -> JudgeResult:
        client._sem = asyncio.Semaphore(opts.concurrency)
        return await ask(client, syn_job, 0)

    syn = run_sync(phase2)
    bar.close()
    costs["synthesis"].append(None if syn.skipped else syn.cost_usd)
    if not syn.ok:
        summary["failed_analyses"].append({"analysis": "synthesis", "unit": "all", "model": syn.model, "error": syn.error})
        summary["judgements_failed"] += not syn.skipped

    # -- outputs ---------------------------------------------------------------------------
    written = []
    for analysis, fname in JSON_OUTPUTS.items():
        recs = sorted(records[analysis], key=lambda r: r.get("trial_id", ""))
        atomic_write_json(out_dir / fname, _json_output(analysis, recs, costs[analysis], opts, report))
        written.append(fname)
    comp = sorted(records["comparative"], key=lambda r: r["task_id"])
    atomic_write_text(out_dir / MD_OUTPUTS["comparative"], comparative_md(comp, opts, _cost_total(costs["comparative"])))
    atomic_write_text(out_dir / MD_OUTPUTS["synthesis"], synthesis_md(syn, opts, _cost_total([c for v in costs.values() for c in v])))
    atomic_write_text(out_dir / MD_OUTPUTS["paper_snippets"], paper_snippets_md(comp, syn, opts))
    written += [MD_OUTPUTS["comparative"], MD_OUTPUTS["synthesis"], MD_OUTPUTS["paper_snippets"]]
    rows = agreement_rows(records, k, client_b.model if client_b else None, human, opts)
    if rows:
        atomic_write_text(out_dir / MD_OUTPUTS["agreement"], agreement_md(rows, opts, k, human, records))
        written.append(MD_OUTPUTS["agreement"])
    if human:
        text = contrasts_md(records, human, opts)
        if text:
            atomic_write_text(out_dir / MD_OUTPUTS["contrasts"], text)
            written.append(MD_OUTPUTS["contrasts"])

    led = ledger.summary()
    summary.update(
        requests=led["requests"],
        cache_hits=led["cache_hits"],
        retries=led["retries"],
        repairs=led["repairs"],
        spent_usd=led["spent_usd"],
        spend_complete=led["spend_complete"],
        unsettled_usd=led["unsettled_usd"],
        reserved_peak_usd=led["reserved_peak_usd"],
        overrun_usd=led["overrun_usd"],
        budget_stopped=led["budget_stopped"],
        spend=ledger.budget_line(),
    )
    summary["failed_analyses"].sort(key=lambda f: (f["analysis"], f["unit"], f["model"] or ""))
    if ledger.budget_stopped:
        summary["budget_stop"] = f"budget stop: {ledger.budget_stopped} judgements not asked, as their worst case did not fit; {ledger.budget_line()}"
        _say(summary["budget_stop"])
    if summary["judgements_failed"]:
        _say(f"error: {summary['judgements_failed']} of {len(jobs) * k + (len(jobs) if client_b else 0) + 1} LLM judgements "
             f"failed (each is a failed record with its reason; see failed_analyses in {SUMMARY_FILE})")
    written.append(SUMMARY_FILE)
    summary["outputs"] = written
    atomic_write_json(out_dir / SUMMARY_FILE, summary)
    if not opts.quiet:
        spent = (
            "unknown"
            if summary["spent_usd"] is None
            else f"{summary['spent_usd']:.4f} USD" + ("" if summary["spend_complete"] else " (a lower bound: some calls have no price or no answer)")
        )
        spend = ledger.budget_line() if opts.budget_usd is not None else f"spent {spent}"
        ratio = f"; prompts hold {report['ratio']:.0%} of the naive trajectory dump" if report["ratio"] else ""
        _say(
            f"Layer 2: {len(jobs) * k + 1} judgements, {summary['requests']} requests, {summary['cache_hits']} cache hits, "
            f"{summary['judgements_failed']} failed, {summary['budget_stopped']} not asked (budget), {spend}{ratio}"
        )
    return summary


def layer2_exit_code(summary: dict) -> int:
    """0, or :data:`JUDGEMENTS_FAILED_EXIT` when judgements failed (not asked for the budget is not a failure)."""
    return JUDGEMENTS_FAILED_EXIT if summary.get("judgements_failed") else 0


def _cost_total(costs: list[float | None]) -> float | None:
    """Sum of known costs; None when any is unknown (cached answers keep their original cost)."""
    if any(c is None for c in costs):
        return None
    return round(sum(c for c in costs if c is not None), 8)


def _json_output(analysis: str, recs: list[dict], costs: list[float | None], opts: Layer2Options, report: dict) -> dict:
    tpl = load_template(analysis)
    out = {
        "analysis": analysis,
        "model": opts.model,
        "judge_model_b": opts.judge_model_b,
        "prompt_template": tpl.name,
        "prompt_version": tpl.version,
        "judge_samples": opts.judge_samples,
        "judge_temperature": opts.judge_temperature,
        "blinded": bool(opts.blind) and analysis not in set(opts.unblind or []),
        "class_order": ("shuffled per judgement" if opts.shuffle_classes else "fixed") if analysis in ("strategy", "failure") else None,
        "seed": opts.seed,
        "simulated": bool(opts.simulated),
        "n_units": len(recs),
        "n_ok": sum(1 for r in recs if r["ok"]),
        "n_failed": sum(1 for r in recs if not r["ok"]),
        "cost_usd": _cost_total(costs),
        "condensation": report,
        "records": recs,
    }
    if opts.simulated:
        out["notice"] = SIMULATED_NOTICE
    return out


def _banner(opts: Layer2Options) -> str:
    return f"> **{SIMULATED_NOTICE}**\n" if opts.simulated else ""


def _footer(opts: Layer2Options, cost: float | None) -> str:
    c = "unknown (no price for the model)" if cost is None else f"{cost:.4f} USD"
    return f"\n---\nJudge: `{opts.model}`, seed {opts.seed}; cost of these judgements: {c}.\n"


def comparative_md(recs: list[dict], opts: Layer2Options, cost: float | None) -> str:
    """comparative_narratives.md: one section per task."""
    parts = ["# Comparative narratives\n", _banner(opts)]
    if not recs:
        parts.append("No task was attempted by more than one profile.\n")
    for r in recs:
        parts.append(f"## {r['task_id']}\n\nProfiles: {', '.join(r['profiles'])}\n")
        if not r["ok"]:
            parts.append(f"*Analysis failed: {r['error']}*\n")
            continue
        d = r["result"]
        parts.append(f"**Winner:** {d['winner']}  \n**Key differentiator:** {d['key_differentiator']}\n")
        for q in d["quotes"]:
            parts.append(f"> {q['text']}  \n> — {q['profile']}, step {q['step']}\n")
        parts.append(f"{d['paragraph']}\n")
    parts.append(_footer(opts, cost))
    return "\n".join(p for p in parts if p)


def _bullets(items: list[str]) -> str:
    return "\n".join(f"- {x}" for x in items) if items else "- (none)"


def synthesis_md(syn: JudgeResult, opts: Layer2Options, cost: float | None) -> str:
    """synthesis.md: the synthesis fields as sections."""
    parts = ["# Synthesis\n", _banner(opts)]
    if not syn.ok:
        parts.append(f"*Synthesis failed: {syn.error}*\n")
    else:
        d = syn.data
        parts.append(
            "## Task difficulty (hardest first)\n\n"
            + ("\n".join(f"{i}. {t}" for i, t in enumerate(d["task_difficulty_ranking"], 1)) or "(none)")
            + "\n"
        )
        parts.append("## Where MCP tools helped\n\n" + _bullets(d["mcp_benefit_patterns"]) + "\n")
        parts.append("## Where MCP tools cost more than they gave\n\n" + _bullets(d["mcp_overhead_patterns"]) + "\n")
        parts.append("## Emergent findings\n\n" + _bullets(d["emergent_findings"]) + "\n")
        claims = (
            "\n".join(f"- **{c['statement']}** ({c['confidence']} confidence). Evidence: {c['evidence']}" for c in d["paper_claims"])
            or "- (none)"
        )
        parts.append("## Paper claims\n\n" + claims + "\n")
        parts.append("## Limitations\n\n" + _bullets(d["limitations"]) + "\n")
        parts.append("## Future work\n\n" + _bullets(d["future_work"]) + "\n")
    parts.append(_footer(opts, cost).replace("these judgements", "all Layer 2 judgements"))
    return "\n".join(p for p in parts if p)


def paper_snippets_md(comp: list[dict], syn: JudgeResult, opts: Layer2Options) -> str:
    """paper_snippets.md: the paper-ready paragraphs and claims, each marked as judge-written."""
    parts = ["# Paper snippets (written by the LLM judge: check every figure before use)\n", _banner(opts)]
    parts.append("## Results per task\n")
    ok = [r for r in comp if r["ok"]]
    parts.append("\n\n".join(f"**{r['task_id']}.** {r['result']['paragraph']}" for r in ok) or "(no comparative narrative)")
    parts.append("\n## Claims\n")
    if syn.ok and syn.data["paper_claims"]:
        parts.append("\n".join(f"- {c['statement']} ({c['confidence']} confidence; {c['evidence']})" for c in syn.data["paper_claims"]))
    else:
        parts.append("(no synthesis)")
    if syn.ok and syn.data["limitations"]:
        parts.append("\n## Limitations\n\n" + _bullets(syn.data["limitations"]))
    return "\n".join(p for p in parts if p) + "\n"


def _labels(recs: list[dict], field_name: str, side: str = "a") -> list:
    if side == "b":
        return [(r["model_b"]["result"] or {}).get(field_name) if r["model_b"]["ok"] else None for r in recs]
    return [(r["result"] or {}).get(field_name) if r["ok"] else None for r in recs]


def _sorted_records(records: dict[str, list[dict]], analysis: str) -> list[dict]:
    return sorted(records.get(analysis, []), key=lambda r: r.get("trial_id") or r.get("task_id"))


def _human_pairs(recs: list[dict], judge: list, analysis: str, human: dict[tuple[str, str], str]) -> list[tuple]:
    """(judge label, human label) of the units a person labelled; a failed judgement gives a None judge label."""
    hum = [human.get((analysis, r.get("trial_id") or r.get("task_id"))) for r in recs]
    return [(a, h) for a, h in zip(judge, hum, strict=True) if h is not None]


def agreement_rows(
    records: dict[str, list[dict]], k: int, model_b: str | None, human: dict[tuple[str, str], str], opts: Layer2Options | None = None
) -> list[dict]:
    """Self-agreement (K samples), judge A vs judge B and judge vs human rows per analysis, with intervals."""
    opts = opts or Layer2Options()
    boot = dict(reps=opts.bootstrap_reps, seed=opts.seed)
    rows = []
    for analysis in ("strategy", "failure", "mcp", "comparative"):
        field_name = LABEL_FIELDS[analysis]
        recs = _sorted_records(records, analysis)
        if not recs:
            continue
        label_a = _labels(recs, field_name)
        if k > 1:
            rows.append(
                self_agreement_row(
                    f"{analysis} ({field_name})", [[s["label"] for s in r["samples"]] for r in recs], opts.judge_temperature, **boot
                )
            )
        if model_b:
            rows.append(
                agreement_row(
                    f"{analysis} ({field_name})", f"judge A vs judge B ({model_b})", label_a, _labels(recs, field_name, "b"), **boot
                )
            )
        # Only units a person labelled count; a failed judgement on one of them is a missing judge label.
        pairs = _human_pairs(recs, label_a, analysis, human)
        if pairs:
            rows.append(
                agreement_row(f"{analysis} ({field_name})", "judge vs human labels", [a for a, _ in pairs], [h for _, h in pairs], **boot)
            )
    return rows


def agreement_md(rows: list[dict], opts: Layer2Options, k: int, human: dict, records: dict[str, list[dict]] | None = None) -> str:
    """judge_agreement.md: the agreement table, the judge-vs-human confusion matrices and how to read them."""
    notes = [
        "# Judge agreement\n",
        _banner(opts),
        f"Judge A: `{opts.model}`"
        + (f"; judge B: `{opts.judge_model_b}`" if opts.judge_model_b else "")
        + f"; samples per judgement: {k}, all at temperature {opts.judge_temperature:g} (the reported label is their majority); seed {opts.seed}; "
        + (
            "judge blinded to arm names" + (f" except for {', '.join(opts.unblind)}" if opts.unblind else "")
            if opts.blind
            else "judge NOT blinded to arm names"
        )
        + f"; class order {'shuffled per judgement' if opts.shuffle_classes else 'fixed'}.\n",
        "Labels compared: the categorical field of each analysis. Cohen's kappa for two raters; Fleiss' kappa across "
        "the K samples of one judge; Krippendorff's alpha (nominal) and Gwet's AC1 for any number of raters (AC1 stays "
        "stable when one class dominates, where kappa and alpha collapse). Brackets: 95 % percentile bootstrap interval "
        f"over units ({opts.bootstrap_reps} resamples). % agreement for self-agreement is the share of units on which all "
        "samples agree. `failed (a / b)`: units without a label from each side (failed judgements), left out of the statistics.\n",
        *([f"**Few units:** with fewer than {FEW_UNITS} units (here as few as {min(r['units'] for r in rows)}) a percentile "
           "bootstrap interval of kappa, alpha or AC1 is too narrow (it covers the true agreement less often than its "
           "nominal 95 %): read it as a lower bound on the uncertainty, not as a confidence interval.\n"]
          if rows and min(r["units"] for r in rows) < FEW_UNITS else []),
        format_agreement_md(rows) + "\n",
    ]
    if human and records:
        for analysis in ("strategy", "failure", "mcp", "comparative"):
            recs = _sorted_records(records, analysis)
            pairs = _human_pairs(recs, _labels(recs, LABEL_FIELDS[analysis]), analysis, human)
            if pairs:
                cm = confusion_matrix([h for _, h in pairs], [x for x, _ in pairs], "human", "judge")
                notes.append(
                    f"## Confusion matrix, {analysis} ({LABEL_FIELDS[analysis]}): human rows, judge columns\n\n{format_confusion_md(cm)}\n"
                )
    if human:
        notes.append(f"Human labels: {len(human)} rows from `{Path(opts.human_labels).name}`.\n")
    return "\n".join(n for n in notes if n)


def contrast_frame(records: list[dict], field_name: str, human: dict[tuple[str, str], str], analysis: str) -> pd.DataFrame:
    """One row per judged trial: arm (profile), the judge's label (None when failed) and the human label."""
    return pd.DataFrame(
        [
            {"arm": r["profile"], "judge": judge, "human": human.get((analysis, r["trial_id"]))}
            for r, judge in zip(records, _labels(records, field_name), strict=True)
        ],
        columns=["arm", "judge", "human"],
    )


def contrasts_md(records: dict[str, list[dict]], human: dict[tuple[str, str], str], opts: Layer2Options) -> str | None:
    """judge_contrasts.md: per class, the between-arm prevalence difference, judge-only and PPI-corrected."""
    parts = []
    for analysis in ("strategy", "failure", "mcp"):
        recs = records.get(analysis) or []
        profiles = sorted({r["profile"] for r in recs})
        if len(profiles) < 2:
            continue
        if opts.baseline is None and not opts.pairs:
            raise ValueError("judge contrasts need the study's baseline: none was given")
        frame = contrast_frame(recs, LABEL_FIELDS[analysis], human, analysis)
        tables, missing = [], []
        for base, arms in _contrast_groups(profiles, opts):
            if base not in profiles:
                missing.append(base)
            elif arms:
                tables.append(arm_contrasts(frame[frame["arm"].isin([base, *arms])], base))
        text = format_contrasts_md(pd.concat(tables, ignore_index=True)) if tables else ""
        if missing:
            text += ("\n\n" if text else "") + f"No judged trial of the baseline arm {', '.join(missing)}: no contrast."
        parts.append(f"## {analysis} ({LABEL_FIELDS[analysis]})\n\n{text}\n")
    if not parts:
        return None
    head = [
        "# Between-arm contrasts of judge labels\n",
        _banner(opts),
        "Per class: the difference in prevalence between an arm and the baseline, with a 95 % interval. The judge-only "
        "difference counts the judge's labels and ignores its errors; the PPI-corrected difference (prediction-powered "
        "inference, Angelopoulos et al. 2023) adds the judge's average error measured on the human-labelled trials of each "
        "arm, so its interval stays valid when the judge is biased. It needs a random human-labelled subset of each arm "
        "(at least 2 trials); '-' where there is none. Failed judgements are left out of both.\n",
    ]
    return "\n".join(head + parts)


def _contrast_groups(profiles: list[str], opts: Layer2Options) -> list[tuple[str, list[str]]]:
    """(baseline arm, the arms contrasted with it): the study's pairs when it has them, else every arm against the
    baseline."""
    if opts.pairs:
        return [(a, [b]) for a, b in opts.pairs if a in profiles or b in profiles]
    return [(str(opts.baseline), [p for p in profiles if p != opts.baseline])]


def load_layer2_outputs(out_dir: str | Path) -> dict:
    """Everything Layer 2 wrote in ``out_dir``: parsed JSON and Markdown text, None where absent.

    Keys: strategy, failure, mcp (the JSON objects), comparative_md, synthesis_md,
    paper_snippets_md, agreement_md (text), summary (the run log) and estimate.
    """
    out_dir = Path(out_dir)

    def j(name: str):
        p = out_dir / name
        if not p.is_file():
            return None
        try:
            return read_json(p, stage="layer2")
        except InputError as exc:
            _say(str(exc))
            return None

    def t(name: str):
        p = out_dir / name
        return p.read_text(encoding="utf-8") if p.is_file() else None

    out: dict[str, Any] = {k: j(v) for k, v in JSON_OUTPUTS.items()}
    out.update({f"{k}_md": t(v) for k, v in MD_OUTPUTS.items()})
    out["summary"] = j(SUMMARY_FILE)
    out["estimate"] = j(ESTIMATE_FILE)
    return out


def records_df(output: dict | None) -> pd.DataFrame:
    """One analysis output's records as a flat frame (result fields as ``result.<name>`` columns)."""
    if not output or not output.get("records"):
        return pd.DataFrame()
    return pd.json_normalize(output["records"], sep=".")


def layer2_frames(outputs: dict) -> dict[str, pd.DataFrame]:
    """Tidy count tables for the notebooks, from :func:`load_layer2_outputs`.

    ``strategy``: profile x primary_strategy counts; ``failure``: profile x root_cause counts;
    ``mcp``: per profile the mean scores and init_timing counts; ``failed``: the failed judgements.
    Empty frames where an output is absent.
    """
    frames: dict[str, pd.DataFrame] = {}
    for analysis, field_name in (("strategy", "primary_strategy"), ("failure", "root_cause")):
        df = records_df(outputs.get(analysis))
        col = f"result.{field_name}"
        if df.empty or col not in df.columns:
            frames[analysis] = pd.DataFrame()
            continue
        ok = df[df["ok"]]
        frames[analysis] = ok.groupby(["profile", col]).size().rename("trials").reset_index().rename(columns={col: field_name})
    df = records_df(outputs.get("mcp"))
    if df.empty or "result.utilization_quality" not in df.columns:
        frames["mcp"] = pd.DataFrame()
    else:
        ok = df[df["ok"]]
        scores = ["utilization_quality", "dependency_leverage", "search_effectiveness"]
        agg = ok.groupby("profile")[[f"result.{s}" for s in scores]].mean().round(3)
        agg.columns = [f"mean_{s}" for s in scores]
        timing = ok.groupby(["profile", "result.init_timing"]).size().unstack(fill_value=0)
        timing.columns = [f"init_{c}" for c in timing.columns]
        frames["mcp"] = agg.join(timing).reset_index()
    failed = []
    for analysis in JSON_OUTPUTS:
        for rec in (outputs.get(analysis) or {}).get("records", []):
            if not rec["ok"]:
                failed.append({"analysis": analysis, "unit": rec.get("trial_id"), "error": rec["error"]})
    frames["failed"] = pd.DataFrame(failed, columns=["analysis", "unit", "error"])
    return frames
