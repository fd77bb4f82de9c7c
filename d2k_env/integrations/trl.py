"""TRL: a kernel task as an environment for ``GRPOTrainer(environment_factory=...)``.

TRL makes one :class:`KernelToolEnv` per rollout (``environment_factory=KernelToolEnv``, or a
``functools.partial`` of it with env options), calls ``reset(**row)`` with the dataset row and
appends the returned prompt to the row's last user message, exposes every public method but
``reset`` and ``get_reward`` to the model as a tool (schema from the type hints and docstring), and
scores the finished rollout with ``get_reward()``. So the tools here are exactly the env's tools
(:data:`d2k_env.tools.TOOLS`), each returning the env's observation text, and the reward is the
env's: that of ``submit``, or 0 when the rollout never submitted.

A call the env refuses (bad arguments, a path outside the workspace, an unknown workload) raises
:class:`ToolError`, as TRL's own tools raise on bad input: TRL shows the model the message and
counts the call in ``tools/failure_frequency``. So does any call after the episode ended (after
``submit``, or with the step budget used up): it does nothing, and its message says so. A
solution that fails its tests is no tool failure: the verdict is the tool's result.

The rows come from :func:`build_dataset` (tasks x guidance conditions x seeds). The adapter pickles
without its env (it keeps only its arguments and builds the env at the first reset), so the async
trainer can ship it to rollout workers. Cleanup: the env is closed when the adapter is collected,
or explicitly by using the adapter as a context manager (a public ``close`` would become a tool).

``import d2k_env.integrations.trl`` needs neither TRL nor ``datasets``; :func:`build_dataset`
imports ``datasets``.
"""

from __future__ import annotations

import weakref
from typing import TYPE_CHECKING, Any, Iterable

from d2k_env.chat_format import SYSTEM_PROMPTS
from d2k_env.integrations.common import GUIDANCE_CONDITIONS, LazyEnv, condition_rows, tool_action

if TYPE_CHECKING:
    from datasets import Dataset


def build_dataset(tasks: Iterable[str] | None = None, guidance: Iterable[str] = GUIDANCE_CONDITIONS,
                  seeds: Iterable[int] = (0,), system_prompt: str | None = SYSTEM_PROMPTS["function"]) -> "Dataset":
    """A ``datasets.Dataset`` with one row per (task, guidance condition, seed) for GRPOTrainer.

    Each row has ``prompt`` (conversational: the system prompt, if any, and an empty user message
    that TRL fills with the task prompt ``reset`` returns), and ``task``, ``guidance`` and ``seed``,
    which TRL passes to :meth:`KernelToolEnv.reset`. ``tasks`` defaults to every registered task.
    """
    from datasets import Dataset

    head = [{"role": "system", "content": system_prompt}] if system_prompt else []
    rows = [{"prompt": head + [{"role": "user", "content": ""}], **row}
            for row in condition_rows(tasks, guidance, seeds)]
    return Dataset.from_list(rows)


class ToolError(ValueError):
    """A tool call that did nothing: the env refused it, or the episode had ended."""


# The env's info["error"] on a call after the episode ended, and what the model is told instead
# (the env's own text asks the caller to reset, which the model cannot do).
ENDED = {"episode already ended": "the solution was submitted",
         "step budget used up": "its step budget is used up"}


class KernelToolEnv:
    """One rollout's kernel task, its tools as methods (see the module docstring).

    ``task``: the task used when a reset names none. ``env_kwargs`` go to
    :class:`~d2k_env.env.KernelEnv` (``backend``, ``reward``, ``max_steps``, ``evaluator``,
    ``evaluator_options``, ...); they must pickle for the adapter to pickle.
    """

    def __init__(self, task: str | None = None, **env_kwargs: Any):
        self._default_task = task
        self._env = LazyEnv(**env_kwargs)
        self._reward = 0.0
        # Closes the env (its workspace and evaluation workers) when the adapter is collected.
        self._finalizer = weakref.finalize(self, LazyEnv.close, self._env)

    def reset(self, task: str | None = None, guidance: str | None = None, seed: int | None = None,
              **row: Any) -> str:
        """Start a new episode and return its task prompt.

        Args:
            task: The task id (a dataset row's ``task``); defaults to the adapter's ``task``.
            guidance: The guidance layers shown, e.g. "none" or "L1+L2"; defaults to the env's.
            seed: The episode's seed.
            row: The rest of the dataset row (``prompt`` and any other column), ignored.
        """
        task = task or self._default_task
        if task is None:
            raise ValueError("no task: give the row a 'task' column or the adapter a task")
        self._reward = 0.0
        prompt, _ = self._env.reset(task, guidance, seed)
        return prompt

    def get_reward(self) -> float:
        """The episode's reward: that of its submit, 0.0 when it has not submitted."""
        return self._reward

    # -- Tools: one per env tool, each returning the env's observation ----------------------------
    def list_files(self) -> str:
        """List the files in the workspace with their sizes.

        Returns:
            One line per file.
        """
        return self._call("list_files")

    def read_file(self, path: str, start: int | None = None, end: int | None = None) -> str:
        """Read a file of the workspace, optionally only some of its lines.

        Args:
            path: Path relative to the workspace, e.g. baseline.py.
            start: First line to show (1-based); defaults to the first.
            end: Last line to show (inclusive); defaults to the last.

        Returns:
            The numbered lines.
        """
        return self._call("read_file", path=path, start=start, end=end)

    def write_file(self, path: str, content: str) -> str:
        """Create or overwrite a file of the workspace.

        Args:
            path: Path relative to the workspace, e.g. solution.py.
            content: The whole new content of the file.

        Returns:
            How many bytes were written.
        """
        return self._call("write_file", path=path, content=content)

    def str_replace(self, path: str, old: str, new: str) -> str:
        """Replace the one occurrence of a string in a file of the workspace.

        Args:
            path: Path relative to the workspace, e.g. solution.py.
            old: The exact text to replace; it must occur exactly once.
            new: The text to put in its place.

        Returns:
            Where the replacement was made.
        """
        return self._call("str_replace", path=path, old=old, new=new)

    def run_tests(self) -> str:
        """Compile solution.py and check its outputs against the baseline on every workload.

        Returns:
            The verdict per workload.
        """
        return self._call("run_tests")

    def benchmark(self, workloads: list[str] | None = None) -> str:
        """Check correctness, then time solution and baseline side by side.

        Args:
            workloads: Names of the workloads to time; defaults to all of them.

        Returns:
            Correctness, speedups and the fraction of the roofline reached.
        """
        return self._call("benchmark", workloads=workloads)

    def profile(self, workload: str) -> str:
        """Per-kernel GPU time of solution.py on one workload.

        Args:
            workload: Name of the workload to profile.

        Returns:
            The kernels and their times.
        """
        return self._call("profile", workload=workload)

    def submit(self) -> str:
        """Final evaluation of solution.py on fresh secret inputs; ends the episode with its reward.

        Returns:
            The verdict and the reward.
        """
        return self._call("submit")

    # -- Plumbing ---------------------------------------------------------------------------------
    def _call(self, tool: str, **args: Any) -> str:
        observation, reward, _, _, info = self._env.step(tool_action(tool, **args))
        self._reward += reward  # nonzero only on submit, which ends the episode
        error = info.get("error")
        if error in ENDED:
            raise ToolError(f"episode ended ({ENDED[error]}): {tool} did nothing, and no tool call counts now")
        if error is not None:
            raise ToolError(error)
        return observation

    def __enter__(self) -> "KernelToolEnv":
        return self

    def __exit__(self, *exc: object) -> None:
        self._finalizer()

    def __getstate__(self) -> dict[str, Any]:
        return {"task": self._default_task, "env_kwargs": self._env.env_kwargs}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(state["task"], **state["env_kwargs"])
