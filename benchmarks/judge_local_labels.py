"""The failure judge of the local 135M model on the shared human-labelled traces (TRAIL SWE-bench, Who&When).

Prints the judge-vs-human agreement table (kappa, alpha, AC1 with 95 % bootstrap intervals) and the
share of answers that are the first class shown, with the class list in a fixed order and shuffled
per judgement. A 135M model's agreement is a pipeline check, not a validity figure. Answers go to
the shared LLM cache, so a second run sends nothing. Takes about 15 minutes on a busy 2-core machine.

    python benchmarks/judge_local_labels.py [--max-chars 1200] [--threads 1]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("LITELLM_LOG", "ERROR")
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from analysis_lib.judge.agreement import agreement_row, confusion_matrix, format_agreement_md, format_confusion_md  # noqa: E402
from analysis_lib.judge.analyses import blind_job, failure_jobs, trial_id  # noqa: E402
from analysis_lib.judge.blind import vocabulary  # noqa: E402
from analysis_lib.judge.cache import ResponseCache, default_cache_dir  # noqa: E402
from analysis_lib.judge.client import JudgeClient  # noqa: E402
from analysis_lib.judge.labels import load_trail, load_who_and_when  # noqa: E402
from analysis_lib.judge.local_model import LITELLM_MODEL, missing_packages, start_server  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--labels", default=str(ROOT.parent / "shared" / "fixtures" / "real" / "judge-labels"), help="judge-labels fixture folder"
    )
    ap.add_argument("--max-chars", type=int, default=1200, help="condensed trajectory budget")
    ap.add_argument("--threads", type=int, default=1, help="server threads (1 is fastest on a busy machine)")
    args = ap.parse_args(argv)
    reason = missing_packages()
    if reason:
        print(f"error: {reason}", file=sys.stderr)
        return 2
    root = Path(args.labels)
    if not root.is_dir():
        print(f"error: {root.name} not found beside the checkout", file=sys.stderr)
        return 2
    items = load_trail(root / "trail") + load_who_and_when(root / "who-and-when")
    trials = [i.trial for i in items]
    human = {trial_id(i.trial): i.human_root_cause for i in items}
    server, url = start_server(n_ctx=8192, threads=args.threads)
    vocab = vocabulary(trials)
    rows, notes = [], []
    for shuffle in (False, True):
        jobs = [blind_job(j, vocab) for j in failure_jobs(trials, {}, max_chars=args.max_chars, shuffle_classes=shuffle)]
        client = JudgeClient(
            LITELLM_MODEL,
            api_base=url,
            api_key="no-key",
            cache=ResponseCache(default_cache_dir()),
            concurrency=1,
            max_tokens=400,
            max_string_chars=40,
            max_list_items=2,
        )
        t0 = time.perf_counter()
        res = client.judge_many([lambda j=j, client=client: client.judge(j.template, j.variables, j.schema, 0) for j in jobs])
        labels = [r.data["root_cause"] if r.ok else None for r in res]
        answered = [(lab, j) for lab, j in zip(labels, jobs, strict=True) if lab is not None]
        first = sum(lab == j.class_order[0] for lab, j in answered)
        pairs = [(a, human[j.unit_id]) for a, j in zip(labels, jobs, strict=True) if human[j.unit_id] is not None]
        order = "shuffled" if shuffle else "fixed"
        rows.append(
            agreement_row(
                "failure (root_cause)", f"judge vs human ({order} class order)", [a for a, _ in pairs], [h for _, h in pairs], reps=2000
            )
        )
        notes.append(
            f"{order} class order: first class shown picked in {first} of {len(answered)} answers "
            f"({len(jobs) - len(answered)} failed); {client.ledger.requests} requests, {time.perf_counter() - t0:.0f} s"
        )
        notes.append(format_confusion_md(confusion_matrix([h for _, h in pairs], [a for a, _ in pairs], "human", "judge")))
    del server
    print(format_agreement_md(rows))
    print("\n" + "\n\n".join(notes))
    return 0


if __name__ == "__main__":
    sys.exit(main())
