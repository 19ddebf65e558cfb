"""Benchmark of the Layer 2 client: 200 judgements against a loopback server answering in 100 ms.

Prints (1) wall time against the ideal calls x latency / concurrency (target: within 1.5x),
(2) the requests sent by a second run over the same inputs (target: zero, all from the cache) and
(3) the condensed-vs-naive prompt size of the trajectories judged. The server (tests/llm_server.py)
runs in its own process on 127.0.0.1, so that it does not share the client's interpreter lock.

    python benchmarks/bench_judge.py [--calls 200] [--latency 0.1] [--concurrency 4] [--seed 0]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("LITELLM_LOG", "ERROR")
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from analysis_lib.core.trial import Step, ToolCall, Trajectory, Trial  # noqa: E402
from analysis_lib.judge.analyses import strategy_jobs  # noqa: E402
from analysis_lib.judge.cache import ResponseCache  # noqa: E402
from analysis_lib.judge.client import JudgeClient  # noqa: E402

ANSWER = json.dumps({"primary_strategy": "grep_and_fix", "strategy_quality": 0.6, "adaptation_events": []})
WORDS = ["def", "return", "self", "import", "value", "error", "test", "module", "x", "\n"]


def synthetic_trial(i: int, rng: random.Random) -> Trial:
    """A trajectory of realistic shape: 30-80 steps, tool outputs of 0.5-6 KB, a fifth of shell calls failing."""
    steps = [Step(step_id=1, source="user", message=f"Task {i}: fix the failing test in module_{i}.py")]
    for s in range(2, rng.randint(30, 80) + 1):
        name = rng.choice(["Read", "Grep", "Edit", "Bash"])
        out = " ".join(rng.choices(WORDS, k=rng.randint(100, 1200)))
        err = name == "Bash" and rng.random() < 0.2
        calls = [ToolCall(step_id=s, name=name, arguments={"file_path": f"src/module_{i}.py", "pattern": "def x" * 5},
                          output=("Traceback (most recent call last)\n" if err else "") + out, is_error=err)]
        steps.append(Step(step_id=s, source="agent", message="Thinking about the next move. " * rng.randint(1, 20), tool_calls=calls))
    traj = Trajectory(schema_version="ATIF-v1.4", steps=steps)
    return Trial(
        profile="p",
        task_id=f"task-{i:03d}",
        repetition=0,
        run_id="bench",
        trial_path=f"bench/{i}",
        source_format="run_layout",
        trajectory=traj,
        reward=0.0,
    )


def _http(url: str, data: bytes | None = None) -> dict:
    with urllib.request.urlopen(urllib.request.Request(url, data=data), timeout=10) as resp:
        return json.loads(resp.read())


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--calls", type=int, default=200)
    ap.add_argument("--latency", type=float, default=0.1)
    ap.add_argument("--concurrency", type=int, default=4, help="parallel calls (default 4, the CLI default)")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    rng = random.Random(args.seed)
    trials = [synthetic_trial(i, rng) for i in range(args.calls)]
    jobs = strategy_jobs(trials, {})
    naive = sum(c.naive_chars for j in jobs for c in j.condensed)
    condensed = sum(c.condensed_chars for j in jobs for c in j.condensed)

    proc = subprocess.Popen(
        [sys.executable, str(ROOT / "tests" / "llm_server.py"), "--answer", ANSWER, "--latency", str(args.latency)],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        url = proc.stdout.readline().strip()
        if not url.startswith("http://127.0.0.1:"):
            print(f"error: the loopback server did not start (got {url!r})", file=sys.stderr)
            return 2
        with tempfile.TemporaryDirectory() as tmp:

            def run() -> tuple[float, list]:
                client = JudgeClient(
                    "openai/bench-judge", api_base=url, api_key="bench", cache=ResponseCache(tmp), concurrency=args.concurrency
                )
                t0 = time.perf_counter()
                res = client.judge_many([lambda j=j: client.judge(j.template, j.variables, j.schema) for j in jobs])
                return time.perf_counter() - t0, res

            # Warm-up outside the timing: litellm's first call imports and builds its HTTP client.
            warm = JudgeClient("openai/bench-judge", api_base=url, api_key="bench")
            warm.judge_many([lambda: warm.judge(jobs[0].template, {**jobs[0].variables, "task_id": "warm-up"}, jobs[0].schema)])
            _http(url + "/_reset", b"{}")

            wall, res = run()
            stats1 = _http(url + "/_stats")
            _http(url + "/_reset", b"{}")
            wall2, res2 = run()
            stats2 = _http(url + "/_stats")
    finally:
        proc.terminate()
        proc.wait(timeout=10)

    ideal = args.calls * args.latency / args.concurrency
    ratio = wall / ideal if ideal else float("inf")
    ok = sum(r.ok for r in res)
    same = [r.data for r in res] == [r.data for r in res2]
    print(
        f"judgements: {args.calls}, ok {ok}; server latency {args.latency * 1000:.0f} ms; concurrency {args.concurrency}; "
        f"max in flight {stats1['max_in_flight']}"
    )
    print(
        f"first run: {stats1['requests']} requests in {wall:.2f} s; ideal {ideal:.2f} s; ratio {ratio:.2f}x (target <= 1.5x)"
        f" -> {'OK' if ratio <= 1.5 else 'SLOW'}"
    )
    print(f"second run: {stats2['requests']} requests (target 0) in {wall2:.2f} s; identical answers: {same}")
    print(f"prompt size: condensed {condensed / 1e6:.2f} MB vs naive dump {naive / 1e6:.2f} MB -> ratio {condensed / naive:.3f}")
    return 0 if (ok == args.calls and stats2["requests"] == 0 and same) else 1


if __name__ == "__main__":
    sys.exit(main())
