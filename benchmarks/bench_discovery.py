"""Discovery and ``--limit`` on loose agent logs, measured in one run.

Prints three ratios on a folder of mini-swe-agent (``.traj.json``), SWE-agent (``.traj``) and
Claude Code session (``.jsonl``) files, each carrying a long patch or conversation (2 MB by default,
the size of real SWE-agent trajectories and Claude Code sessions; at 400 KB the first ratio is about 0.35):
  1. cold discovery (first bytes of each file) / parsing every file whole, which is what telling
     a ``.traj`` file's kind cost before (target < 0.1);
  2. warm discovery (the trials cache's answers for unchanged files) / cold discovery (target < 0.5);
  3. ``trials_table(limit=10)`` / ``trials_table()`` without a cache (target about 10 / n_files).

    python benchmarks/bench_discovery.py [--n 100] [--kb 2000] [--workdir DIR]
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path

import orjson

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from analysis_lib.ingest.discover import discover  # noqa: E402
from analysis_lib.metrics.trials_table import trials_table  # noqa: E402


def write_files(folder: Path, n: int, kb: int) -> int:
    """``n`` files of each kind, about ``kb`` KB each; returns the bytes written."""
    patch = "+ x = 1\n" * (kb * 1024 // 8)
    total = 0
    for i in range(n):
        mini = {"info": {"exit_status": "Submitted", "submission": patch, "mini_version": "1.13.4",
                         "model_stats": {"instance_cost": 0.01, "api_calls": 1}, "config": {"model": {"model_name": "gpt-4o"}}},
                "messages": [{"role": "system", "content": "s"}, {"role": "user", "content": f"task {i}"},
                             {"role": "assistant", "content": "```bash\ncat a.py\n```",
                              "extra": {"response": {"usage": {"prompt_tokens": 900, "completion_tokens": 20}}}},
                             {"role": "user", "content": "<returncode>0</returncode>\n<output></output>"}],
                "trajectory_format": "mini-swe-agent-1"}
        swe = {"trajectory": [{"response": "r", "thought": "t", "action": "ls", "observation": "a.py", "state": "{}"}],
               "history": [{"role": "user", "content": f"task {i}"}],
               "info": {"submission": patch, "model_stats": {"tokens_sent": 900, "tokens_received": 20}}}
        lines = [{"type": "user", "uuid": f"u{i}", "sessionId": f"s{i}", "message": {"role": "user", "content": f"task {i}"}}]
        lines += [{"type": "assistant", "uuid": f"a{i}-{k}", "sessionId": f"s{i}", "requestId": f"r{k}",
                   "message": {"id": f"m{k}", "role": "assistant", "model": "claude-sonnet-4-5", "content": [{"type": "text", "text": patch[:8000]}],
                               "usage": {"input_tokens": 10, "output_tokens": 5}}} for k in range(max(1, kb // 8))]
        for name, data in ((f"task-{i}.traj.json", json.dumps(mini)), (f"inst-{i}.traj", json.dumps(swe)),
                           (f"s{i}.jsonl", "".join(json.dumps(x) + "\n" for x in lines))):
            (folder / name).write_text(data)
            total += len(data)
    return total


def best(fn, repeat: int = 3) -> float:
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=100, help="files of each kind")
    ap.add_argument("--kb", type=int, default=2000, help="approximate size of each file")
    ap.add_argument("--workdir", default=None)
    args = ap.parse_args()
    work = Path(args.workdir or tempfile.mkdtemp(prefix="bench-discovery-"))
    runs = work / "runs"
    shutil.rmtree(runs, ignore_errors=True)
    runs.mkdir(parents=True)
    size = write_files(runs, args.n, args.kb)
    files = sorted(runs.iterdir())
    print(f"{len(files)} files, {size / 1e6:.0f} MB in {runs}")

    def parse_all() -> None:
        for f in files:
            data = f.read_bytes()
            if f.suffix == ".jsonl":
                for line in data.splitlines()[:200]:
                    orjson.loads(line)
            else:
                orjson.loads(data)

    full = best(parse_all)
    cold = best(lambda: discover(runs))
    kinds: dict = {}
    discover(runs, kinds=kinds)
    warm = best(lambda: discover(runs, kinds=dict(kinds)))
    print(f"1. cold discovery {cold:.3f} s / parsing every file {full:.3f} s = {cold / full:.3f} (target < 0.1)")
    print(f"2. warm discovery {warm:.3f} s / cold {cold:.3f} s = {warm / cold:.3f} (target < 0.5)")
    sample = best(lambda: trials_table(runs, limit=10, workers=1), repeat=1)
    whole = best(lambda: trials_table(runs, workers=1), repeat=1)
    print(f"3. --limit 10: {sample:.2f} s / all {len(files)} trials {whole:.2f} s = {sample / whole:.3f} "
          f"(sampling before reading: about {10 / len(files):.3f} plus discovery)")
    if args.workdir is None:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
