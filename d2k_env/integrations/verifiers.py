"""verifiers: the kernel tasks as a multi-turn verifiers environment (the ``verifiers.v1`` API).

:func:`load_environment` returns a :class:`KernelVerifiersEnv` over a :class:`KernelTaskset` of
tasks x guidance conditions x seeds. Each episode runs like the Gymnasium env's text mode: the env
plays the user, opening with the task prompt; the model answers with one tool call per reply (JSON,
fenced JSON or ``<tool_call>``, read by :func:`d2k_env.chat_format.actions_from_text`); each call is
an env step, and its observation is the next user turn, until submit or the step budget ends the
episode. The rubric is :class:`KernelTask`'s: the reward ``kernel_reward`` is the env's own (the
submit's reward, 0 without one), with the metrics ``submitted`` and ``env_steps``.

The model talks through verifiers' plain chat harness (``null``) in a local subprocess runtime,
so an eval needs only an OpenAI-compatible endpoint. verifiers finds a taskset by its id, as an
installed package: ``environments/d2k_kernels`` is that package (``pip install -e
environments/d2k_kernels``, then ``vf-eval d2k_kernels ...``), exporting this module's classes.
Needs the ``verifiers`` extra.
"""

from __future__ import annotations

import asyncio
import sys
from typing import Any, Iterator

import verifiers.v1 as vf
from verifiers.v1.harnesses.null import NullHarnessConfig
from verifiers.v1.runtimes import SubprocessConfig

from d2k_env.chat_format import SYSTEM_PROMPTS, actions_from_text
from d2k_env.integrations.common import GUIDANCE_CONDITIONS, LazyEnv, condition_rows

TASKSET_ID = "d2k_kernels"
# verifiers imports a taskset by its id, as a top-level module. The package of that name is the
# installed way; this lets a process that imported the adapter run episodes without the package.
sys.modules.setdefault(TASKSET_ID, sys.modules[__name__])


class KernelTasksetConfig(vf.TasksetConfig):
    """Which episodes the taskset holds, and how each env is configured."""

    tasks: list[str] | None = None
    """Task ids; None: every registered task."""
    guidance: list[str] = list(GUIDANCE_CONDITIONS)
    """Guidance conditions, e.g. "none", "L1+L2"."""
    seeds: list[int] = [0]
    backend: str = "auto"
    """Evaluation backend: auto, cuda or interpreter."""
    reward: str = "speedup"
    """The env's reward kind (see d2k_env.reward)."""
    max_steps: int = 40
    """The env's step budget per episode (one tool call is one step)."""


class KernelData(vf.TaskData):
    """One episode: the task, the guidance shown and the reset seed."""

    task: str
    guidance: str
    seed: int


class KernelTask(vf.Task[KernelData, vf.State, vf.TaskConfig]):
    """The rubric: the env's reward, and what the episode did. The env writes its outcome to
    ``trace.info["d2k"]`` before the rollout is scored (verifiers awaits each of these)."""

    @vf.reward
    async def kernel_reward(self, trace: vf.Trace) -> float:
        """The env's reward: the submit's, 0.0 when the episode never submitted."""
        return float(_outcome(trace).get("reward", 0.0))

    @vf.metric
    async def submitted(self, trace: vf.Trace) -> float:
        return 1.0 if _outcome(trace).get("submitted") else 0.0

    @vf.metric
    async def env_steps(self, trace: vf.Trace) -> float:
        return float(_outcome(trace).get("steps", 0))


def _outcome(trace: vf.Trace) -> dict[str, Any]:
    return trace.info.get("d2k", {})


class KernelTaskset(vf.Taskset[KernelTask, KernelTasksetConfig]):
    """One task per (task, guidance condition, seed) of the config. The prompt is left to the env
    (it comes from the env's reset), so each task opens with the env's turn."""

    def load(self) -> Iterator[KernelTask]:
        config = self.config
        for row in condition_rows(config.tasks, config.guidance, config.seeds):
            name = f"{row['task']}/{row['guidance']}/{row['seed']}"
            yield KernelTask(KernelData(name=name, prompt=None, system_prompt=SYSTEM_PROMPTS["text"], **row),
                             config.task)


class KernelEnvConfig(vf.EnvConfig):
    """One seat, ``agent``: the plain chat harness on this machine (the env runs the tools)."""

    agent: vf.AgentConfig = vf.AgentConfig(harness=NullHarnessConfig(id="null"), runtime=SubprocessConfig())


class KernelVerifiersEnv(vf.Env[KernelEnvConfig]):
    """The episode loop (see the module docstring); each episode has its own env."""

    async def run(self, task: KernelTask, agents: vf.Agents) -> None:
        config: KernelTasksetConfig = self.taskset.config
        data = task.data
        env = LazyEnv(backend=config.backend, reward=config.reward, max_steps=config.max_steps)
        outcome = {"reward": 0.0, "submitted": False, "steps": 0}
        try:
            # The env's calls block (evaluations take seconds): threads keep other episodes going.
            prompt, _ = await asyncio.to_thread(env.reset, data.task, data.guidance, data.seed)
            async with agents.agent.interaction(task) as interaction:
                segment = await interaction.turn(prompt)
                while not segment.terminated:
                    observations, over = [], False
                    for action in actions_from_text(segment.last_reply):
                        observation, reward, terminated, truncated, info = await asyncio.to_thread(env.step, action)
                        observations.append(observation)
                        outcome["reward"] += reward
                        outcome["steps"] = info["steps"]
                        outcome["submitted"] = outcome["submitted"] or info.get("tool") == "submit"
                        if terminated or truncated:
                            over = True
                            break
                    if over:
                        break
                    segment = await interaction.turn("\n\n".join(observations))
                interaction.trace.info["d2k"] = outcome  # read by KernelTask's rubric as the rollout closes
        finally:
            await asyncio.to_thread(env.close)


def load_environment(tasks: list[str] | None = None, guidance: list[str] | tuple[str, ...] = GUIDANCE_CONDITIONS,
                     seeds: list[int] | tuple[int, ...] = (0,), backend: str = "auto", reward: str = "speedup",
                     max_steps: int = 40, **env_config: Any) -> KernelVerifiersEnv:
    """The verifiers environment over tasks x guidance conditions x seeds (see the module
    docstring). ``env_config`` goes to :class:`KernelEnvConfig` (e.g. ``agent=vf.AgentConfig(...)``
    to pin another harness, runtime, model or turn limit)."""
    taskset = KernelTasksetConfig(id=TASKSET_ID, tasks=tasks, guidance=list(guidance), seeds=list(seeds),
                                  backend=backend, reward=reward, max_steps=max_steps)
    return KernelVerifiersEnv(KernelEnvConfig(taskset=taskset, **env_config))


__all__ = ["KernelTaskset", "KernelVerifiersEnv", "load_environment"]
