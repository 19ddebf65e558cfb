"""A Harbor environment on this machine and an agent with known usage, so that the real ``harbor run`` finishes trials here.

Harbor runs every trial in a container, VM or cloud sandbox; none of them runs on a test machine without Docker.
``HostEnvironment`` gives each trial a root folder of its own, and runs each command with ``chroot`` into it inside a
private user and mount namespace (``unshare``; no root or daemon needed), with the host's system folders bound read
through: the paths Harbor uses (``/app``, ``/logs/agent``, ``/logs/verifier``, ``/tests``, ``/solution``) are the
trial's own. Everything else is Harbor's: the job, the trial, the verifier, the files it writes.

``KnownUsageAgent`` writes ``greeting`` (agent kwarg, default ``hello``) to ``/app/hello.txt`` through the environment,
reports the token usage and cost given as agent kwargs (``--ak n_input_tokens=...``) to Harbor, and leaves an ATIF
trajectory with the same numbers, made with Harbor's own models.

Imported by Harbor's interpreter only (``--env harbor_host:HostEnvironment --agent harbor_host:KnownUsageAgent``, with
this folder on ``PYTHONPATH``); never by the project's tests, whose interpreter has no Harbor.
"""

from __future__ import annotations

import asyncio
import shutil
import tempfile
from pathlib import Path

from harbor.agents.base import BaseAgent
from harbor.environments.base import BaseEnvironment, ExecResult
from harbor.models.agent.context import AgentContext
from harbor.models.trajectories import Agent, FinalMetrics, Metrics, Observation, ObservationResult, Step, ToolCall, Trajectory

USAGE_KEYS = ("n_input_tokens", "n_cache_tokens", "n_output_tokens", "cost_usd")  # AgentContext's usage fields
SYSTEM_DIRS = ("bin", "sbin", "lib", "lib64", "usr", "etc", "dev", "proc")
PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


class HostEnvironment(BaseEnvironment):
    """One trial's root folder on this machine; commands run chrooted into it (see the module docstring)."""

    @staticmethod
    def type() -> str:
        return "host-chroot"

    def _validate_definition(self) -> None:
        pass  # no image to build: the task's environment/ is uploaded to the working folder by Harbor

    async def start(self, force_build: bool) -> None:
        self.root = Path(tempfile.mkdtemp(prefix="harbor-host-"))
        for d in ("tmp", "root", "app", "logs/agent", "logs/verifier", "logs/artifacts"):
            (self.root / d).mkdir(parents=True, exist_ok=True)

    async def stop(self, delete: bool) -> None:
        if delete:
            shutil.rmtree(self.root, ignore_errors=True)

    def _host(self, path: str | Path) -> Path:
        return self.root / str(path).lstrip("/")

    async def upload_file(self, source_path: Path | str, target_path: str) -> None:
        target = self._host(target_path)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(source_path, target)

    async def upload_dir(self, source_dir: Path | str, target_dir: str) -> None:
        shutil.copytree(source_dir, self._host(target_dir), dirs_exist_ok=True)

    async def download_file(self, source_path: str, target_path: Path | str) -> None:
        Path(target_path).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(self._host(source_path), target_path)

    async def download_dir(self, source_dir: str, target_dir: Path | str) -> None:
        shutil.copytree(self._host(source_dir), target_dir, dirs_exist_ok=True)

    async def exec(self, command: str, cwd: str | None = None, env: dict[str, str] | None = None,
                   timeout_sec: int | None = None, user: str | int | None = None) -> ExecResult:
        binds = "; ".join(f'if [ -e /{d} ]; then mkdir -p "$ROOT/{d}"; mount --rbind /{d} "$ROOT/{d}"; fi' for d in SYSTEM_DIRS)
        inner = f"cd {cwd or self.task_env_config.workdir or '/app'} && {command}"
        proc = await asyncio.create_subprocess_exec(
            "unshare", "--user", "--map-root-user", "--mount", "--propagation", "private",
            "sh", "-c", f'set -e; {binds}; exec chroot "$ROOT" /bin/bash -c "$1"', "sh", inner,
            env={"PATH": PATH, "HOME": "/root", "ROOT": str(self.root), **(self._merge_env(env) or {})},
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        )
        try:
            out, err = await asyncio.wait_for(proc.communicate(), timeout_sec)
        except TimeoutError:
            proc.kill()
            raise
        return ExecResult(stdout=out.decode(errors="replace"), stderr=err.decode(errors="replace"), return_code=proc.returncode)


class KnownUsageAgent(BaseAgent):
    """Writes its greeting into the task's working folder and reports the usage it was given (see the module docstring)."""

    def __init__(self, *args, greeting: str = "hello", **kwargs):
        self.usage = {key: kwargs.pop(key, None) for key in USAGE_KEYS}
        super().__init__(*args, **kwargs)
        self.greeting = greeting

    @staticmethod
    def name() -> str:
        return "known-usage"

    def version(self) -> str:
        return "1.0.0"

    async def setup(self, environment: BaseEnvironment) -> None:
        pass

    async def run(self, instruction: str, environment: BaseEnvironment, context: AgentContext) -> None:
        command = f"echo {self.greeting} > /app/hello.txt"
        result = await environment.exec(command)
        if result.return_code != 0:
            raise RuntimeError(f"{command!r} failed: {result.stderr}")
        for key, value in self.usage.items():
            setattr(context, key, value)
        usage = self.usage
        model = (self.model_name or "").split("/")[-1]
        trajectory = Trajectory(
            session_id="known-usage-1",
            agent=Agent(name=self.name(), version=self.version(), model_name=model),
            steps=[
                Step(step_id=1, source="user", message=instruction),
                Step(
                    step_id=2, source="agent", model_name=model, message="Writing the greeting.",
                    tool_calls=[ToolCall(tool_call_id="call-1", function_name="Bash", arguments={"command": command})],
                    observation=Observation(results=[ObservationResult(source_call_id="call-1", content=result.stdout)]),
                    metrics=Metrics(prompt_tokens=usage["n_input_tokens"], completion_tokens=usage["n_output_tokens"],
                                    cached_tokens=usage["n_cache_tokens"], cost_usd=usage["cost_usd"]),
                ),
            ],
            final_metrics=FinalMetrics(total_prompt_tokens=usage["n_input_tokens"], total_completion_tokens=usage["n_output_tokens"],
                                       total_cached_tokens=usage["n_cache_tokens"], total_cost_usd=usage["cost_usd"], total_steps=2),
        )
        (self.logs_dir / "trajectory.json").write_text(trajectory.model_dump_json(indent=2, exclude_none=True))
