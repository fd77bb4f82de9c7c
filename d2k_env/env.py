"""KernelEnv: one Triton kernel task as a Gymnasium environment.

Observation: text (:class:`~d2k_env.text_space.UnicodeText`). After ``reset`` it is the full
prompt (task, baseline, contract, workloads, guidance layers shown, tool manual, budget); after
each ``step`` it is that tool's result.
Action: one tool call ``{"tool": ..., "args": {...}}``, as a dict or as text: the JSON object, or a
reply holding exactly one call, read as :mod:`d2k_env.reply` says (reasoning is never read).
Reward: 0 on every step but ``submit``, which scores the solution (see :mod:`d2k_env.reward`) and
terminates the episode. A bad action is an ordinary step whose observation explains the problem.
Budget: ``max_steps`` steps, stated in the prompt and in ``info["max_steps"]``; the step that
reaches it is truncated. Registration wraps the env in a TimeLimit (``max_episode_steps``, 350 as
D2K-Bench unless ``gym.make`` is given another) and tells the env that limit
(:class:`d2k_env.wrappers.StepBudget`): the budget is the limit, or ``max_steps`` when that was
given and is smaller. A bare ``KernelEnv`` has ``max_steps`` (350 by default).

Design-only episodes (``mode="design"``, D2K-Bench's design protocol): the same spaces, reset and
step, but no kernel is written or run. The workspace holds ``baseline.py`` only; the tools are
``list_files``, ``read_file`` and ``submit_design(design)``, which ends the episode (terminated)
with the design text in ``info["design"]``. The reward is 0 on every step: a design is graded
outside the env, by the judge against the task's design properties
(:meth:`d2k_env.judge.Judge.judge` with ``kind="design"``; ``d2k run --mode design --judge-model``),
and a grade never becomes a reward.
"""

from __future__ import annotations

import copy
import json
import secrets
import stat
import tempfile
import threading
from pathlib import Path
from typing import Any

import gymnasium as gym

from d2k_env import tempdirs
from d2k_env import reward as rewards
from d2k_env.action_log import BLOB_CHARS, ActionLog, Refusal, replay_steps
from d2k_env.blob_store import key_of, utf8
from d2k_env.episode_state import EpisodeState
from d2k_env.evaluator import EvalResult, UnreadableSolution, read_solution, resolve_backend
from d2k_env.prompt import build_design_prompt, build_prompt
from d2k_env.registration import MAX_STEPS, env_id
from d2k_env.service import EvalJob, EvaluationService, make_service
from d2k_env.task import GUIDANCE_LAYERS, load_task, task_ids
from d2k_env.text_space import UnicodeText, escaped
from d2k_env.tools import MAX_ACTION_CHARS, ActionError, format_note, parse_action, toolset
from d2k_env.verdict import format_result
from d2k_env.workspace import Workspace, WorkspaceError

MAX_OBSERVATION_CHARS = 200_000

SOLUTION_STUB = '''"""Your solution. forward(*inputs) must match baseline.py, computed by Triton kernels defined here."""

import torch
import triton
import triton.language as tl


def forward(*inputs):
    raise NotImplementedError(
        "solution.py is still the stub: write @triton.jit kernel(s) and a forward(*inputs) that launches "
        "them, with write_file or str_replace, then call run_tests."
    )
'''


def _action_text(action: Any) -> str:
    """A dict action as the text it is parsed from: JSON when it can be written as JSON, else a
    description (which the parser refuses)."""
    try:
        return json.dumps(action, ensure_ascii=False)  # unescaped: as compact as the text an agent sends
    except Exception:  # noqa: BLE001 - whatever a mapping's own methods raise
        return f"<an action that is not JSON-serialisable: {type(action).__name__}>"


def _check_state(state: Any) -> EpisodeState:
    """The :class:`EpisodeState` ``state`` is (or whose JSON it is), checked: a ValueError unless it
    is shaped like what :meth:`KernelEnv.state` returns and names a registered task. A state may
    come from anywhere: its task id must never reach the file system."""
    state = EpisodeState.from_json(state)
    registered = task_ids()
    if state.task_id not in registered:
        raise ValueError(f"the state's task id {repr(state.task_id)[:100]} is none of the registered tasks: "
                         f"{', '.join(registered)}")
    return state


def _check_budget(name: str, value: Any, optional: bool = False) -> None:
    if not (optional and value is None) and (not isinstance(value, int) or isinstance(value, bool) or value < 1):
        raise ValueError(f"{name} must be a positive int, not {value!r}")


def replay(state: EpisodeState | dict[str, Any], **make_kwargs: Any) -> gym.Env:
    """A new env at the same point as ``state`` (an :class:`EpisodeState` or its JSON), made and
    wrapped as ``gym.make`` makes it (``TimeLimit`` at the state's budget included): reset with the
    same seed, then every step again, each through the wrappers. ``make_kwargs`` go to ``gym.make``
    (an evaluator, say).

    Evaluations run again (``submit`` on fresh secret inputs), so files and file-tool observations
    match exactly, and timings are measured anew. A malformed state, or one whose task id is not a
    registered task, is a ValueError before anything is loaded.
    """
    state = _check_state(state)
    steps = replay_steps(state.actions, state.blobs)
    env = gym.make(env_id(state.task_id), backend=state.backend, guidance=state.guidance, reward=state.reward,
                   max_steps=state.max_steps, max_episode_steps=state.max_steps, mode=state.mode, **make_kwargs)
    try:
        env.reset(seed=state.seed)
        for step in steps:
            env.step(step)  # a Refusal is recorded as the step it was (see KernelEnv.step)
    except BaseException:
        env.close()  # no half-replayed episode left behind
        raise
    return env


def parse_guidance(guidance: str | tuple[str, ...] | list[str] | None) -> tuple[str, ...]:
    """``"none"``, ``"L1"``, ``"L1+L2"``, ``"L1+L2+L3"`` (any subset) or a sequence of layer names."""
    if guidance is None:
        return ()
    if isinstance(guidance, str):
        parts = [] if guidance.strip().lower() in ("", "none") else guidance.split("+")
    else:
        parts = list(guidance)
    layers = [p.strip().upper() for p in parts]
    unknown = [l for l in layers if l not in GUIDANCE_LAYERS]
    if unknown:
        raise ValueError(f"unknown guidance layer(s) {unknown}; use a subset of {GUIDANCE_LAYERS} or 'none'")
    return tuple(l for l in GUIDANCE_LAYERS if l in layers)


def to_observation(text: str, limit: int = MAX_OBSERVATION_CHARS, tail: int = 2000) -> str:
    """The text as its characters, but those outside the observation space's charset (control
    characters, surrogates, characters beyond the Basic Multilingual Plane) as escapes (see
    :func:`d2k_env.text_space.escaped`), CRLF line ends as LF; clipped with a note when too long."""
    text = escaped(text.replace("\r\n", "\n"))
    if len(text) > limit:
        note = "\n[... {:>9} characters clipped here ...]\n"  # fixed width: its length is known up front
        head = limit - len(note.format(0)) - tail
        text = text[:head] + note.format(len(text) - head - tail) + text[-tail:]
    return text


class KernelEnv(gym.Env):
    """One task as an episode of tool calls (see the module docstring).

    Evaluations go to ``evaluator``, an evaluation service (:mod:`d2k_env.service`): by default
    (None) one of the env's own, a :class:`~d2k_env.service.LocalService` with one lane (on the GPU,
    one per visible GPU) and warm workers, made at the first evaluation and closed with the env; or
    ``"ray"`` (a :class:`~d2k_env.service.ray_service.RayService` of the env's own, on the Ray
    cluster ``ray.init`` reaches); or a service object, which many envs may share and which the
    caller closes. ``evaluator_options``: ``limits``, ``time_budget_s`` and ``memcheck`` go with each
    evaluation; the rest configure a service the env makes (e.g. ``spares``, ``jobs``, ``gpus``).
    The env keeps one Triton cache for all its episodes. Each evaluation's ``info["queue"]`` says
    where and how long it waited; its ``info["properties"]`` gives the findings on the task's
    automatically checked design properties (:attr:`EvalResult.properties`), which never enter
    the reward. ``mode``: ``"solution"`` (the default: write, test and submit a kernel) or
    ``"design"`` (state a design and ``submit_design`` it; see the module docstring).

    Copies: the env pickles (pickle, cloudpickle) and deep-copies at any point; a copy goes on from
    the same point in a workspace of its own (see :meth:`__getstate__`).

    Thread safety: ``reset``, ``step``, ``state`` and ``close`` each hold the env's lock for the whole
    call, so an evaluation in flight is awaited: a ``close()`` or ``reset()`` from another thread waits
    for it and never tears down the episode beneath it (both once crashed the step in flight or gave
    the next episode its result).
    """

    JOB_OPTIONS = ("limits", "time_budget_s", "memcheck")

    metadata = {"render_modes": ["ansi"]}

    def __init__(self, task_id: str, backend: str = "auto", guidance: str | tuple[str, ...] = "L1+L2+L3",
                 reward: str = "speedup", render_mode: str | None = None,
                 evaluator_options: dict[str, Any] | None = None, max_steps: int | None = None,
                 evaluator: EvaluationService | str | None = None, mode: str = "solution"):
        self.task = load_task(task_id)
        toolset(mode)  # a ValueError naming the modes for any other
        self.mode = mode
        _check_budget("max_steps", max_steps, optional=True)
        self._max_steps_given = max_steps is not None
        self.max_steps = MAX_STEPS if max_steps is None else max_steps
        self.backend = resolve_backend(backend)
        self.guidance_layers = parse_guidance(guidance)
        self.reward_kind = rewards.check_reward_kind(reward)
        if render_mode not in (None, "ansi"):
            raise ValueError(f"render_mode must be None or 'ansi', not {render_mode!r}")
        self.render_mode = render_mode
        self.evaluator_options = dict(evaluator_options or {})
        if not (evaluator is None or evaluator in ("local", "ray") or callable(getattr(evaluator, "submit", None))):
            raise ValueError(f"evaluator must be None, 'local', 'ray' or an evaluation service (with submit()), "
                             f"not {evaluator!r}")
        if not isinstance(evaluator, (str, type(None))) and getattr(evaluator, "backend", self.backend) != self.backend:
            raise ValueError(f"the evaluation service runs the {evaluator.backend} backend, not this env's {self.backend}")
        self._service_choice = evaluator
        self._service: EvaluationService | None = None if isinstance(evaluator, (str, type(None))) else evaluator
        self._own_service = self._service is None
        self._cache_dir: tempfile.TemporaryDirectory | None = None
        self._client = secrets.token_hex(8)  # names this env's Triton cache on a remote service
        self.observation_space = UnicodeText(MAX_OBSERVATION_CHARS)
        self.action_space = UnicodeText(MAX_ACTION_CHARS)
        self._episode_dir: tempfile.TemporaryDirectory | None = None
        self.workspace: Workspace | None = None
        self._log = ActionLog()  # one entry per step taken: its length is the step count
        self._terminated = False
        self._last_observation = ""
        self._episode_layers = self.guidance_layers
        self._reset_seed: int | None = None
        self._lock = threading.Lock()

    # -- Gymnasium API -------------------------------------------------------------------------
    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        """Start an episode in a fresh workspace. ``options={"guidance": ...}`` overrides the layers."""
        with self._lock:
            return self._reset(seed, options)

    def step(self, action: str | dict | Refusal):
        """Take one tool call (see the module docstring); a bad action is a step, never an exception.
        A :class:`~d2k_env.action_log.Refusal` (how a state records a refused step) is taken as that
        refused step again: :func:`replay` sends it through the wrappers like any step."""
        with self._lock:
            if isinstance(action, Refusal):
                self._require_episode("step")
                return self._ended() or self._refuse(action)
            return self._step(action)

    def state(self) -> EpisodeState:
        """The episode so far (see :class:`~d2k_env.episode_state.EpisodeState`): configuration,
        reset seed, one entry per step (long strings in ``blobs``, each kept once) and the
        workspace's files. :func:`replay` rebuilds the episode from it; ``state().to_json()`` is
        plain JSON data."""
        with self._lock:
            self._require_episode("state")
            return self._state()

    def _state(self) -> EpisodeState:
        actions, blobs = self._log.state()
        files: dict[str, Any] = {}
        for path, text in self.workspace.texts().items():
            key = key_of(text) if len(text) >= BLOB_CHARS else None
            files[path] = {"blob": key} if key in self._log.blobs else text
        return EpisodeState(task_id=self.task.id, backend=self.backend, guidance=self._episode_layers,
                            reward=self.reward_kind, max_steps=self.max_steps, seed=self._reset_seed,
                            steps=len(self._log), terminated=self._terminated, actions=actions, blobs=blobs,
                            files=files, mode=self.mode)

    def follow_time_limit(self, limit: int) -> None:
        """Make the step budget that of a ``TimeLimit`` of ``limit`` steps around this env (or the
        ``max_steps`` given to it, when smaller), from the next reset on."""
        _check_budget("a time limit", limit)
        with self._lock:
            self.max_steps = min(self.max_steps, limit) if self._max_steps_given else limit

    def render(self) -> str | None:
        return self._last_observation if self.render_mode == "ansi" else None

    def close(self) -> None:
        """Remove the episode's workspace; after it, ``step`` and ``state`` raise ResetNeeded until the
        next ``reset``. Closing twice is harmless."""
        with self._lock:
            self._close_episode()
            if self._own_service and self._service is not None:
                self._service.close()
                self._service = None
            if self._cache_dir is not None:
                self._cache_dir.cleanup()
                self._cache_dir = None
        super().close()

    # -- Copies (pickle, cloudpickle, copy.deepcopy) ----------------------------------------------
    def __getstate__(self) -> dict[str, Any]:
        """What a copy is made from: the configuration, and mid-episode the episode's state, random
        generator and last observation. A copy owns its workspace (a directory of its own, the
        files copied), its Triton cache and, unless the env was given a service, its evaluation
        service; a service it was given goes with it (shared by ``copy.deepcopy``; pickled, as a
        handle on the same service: see :mod:`d2k_env.service.bridge`)."""
        with self._lock:
            episode = None
            if self.workspace is not None:
                episode = {"state": self._state(), "last_observation": self._last_observation}
            return {"task_id": self.task.id, "backend": self.backend, "guidance": self.guidance_layers,
                    "reward": self.reward_kind, "render_mode": self.render_mode,
                    "evaluator_options": copy.deepcopy(self.evaluator_options),
                    "evaluator": self._service_choice if self._own_service else self._service,
                    "max_steps": self.max_steps, "max_steps_given": self._max_steps_given, "spec": self.spec,
                    "mode": self.mode,
                    "np_random": copy.deepcopy(self._np_random), "np_random_seed": self._np_random_seed,
                    "episode": episode}

    def __setstate__(self, data: dict[str, Any]) -> None:
        self.__init__(data["task_id"], backend=data["backend"], guidance=data["guidance"], reward=data["reward"],
                      render_mode=data["render_mode"], evaluator_options=data["evaluator_options"],
                      max_steps=data["max_steps"], evaluator=data["evaluator"], mode=data["mode"])
        self._max_steps_given = data["max_steps_given"]
        self.spec = data["spec"]
        self._np_random, self._np_random_seed = data["np_random"], data["np_random_seed"]
        if data["episode"] is not None:
            self._restore(data["episode"]["state"], data["episode"]["last_observation"])

    def __deepcopy__(self, memo: dict[int, Any]) -> "KernelEnv":
        clone = type(self).__new__(type(self))
        memo[id(self)] = clone
        clone.__setstate__(self.__getstate__())  # fresh data throughout, but a given service: shared
        return clone

    def _restore(self, state: EpisodeState, last_observation: str) -> None:
        """Continue the episode ``state`` describes, in a workspace of this env's own."""
        log = ActionLog.restore(state.actions, state.blobs)
        root = self._new_episode_dir()
        for path, content in state.files.items():
            full = self.workspace.resolve(path)  # a state names paths inside the workspace only
            full.parent.mkdir(parents=True, exist_ok=True)
            full.write_bytes(utf8(log.blobs.get(content["blob"]) if isinstance(content, dict) else content))
        (root / "baseline.py").chmod(stat.S_IRUSR | stat.S_IRGRP | stat.S_IROTH)
        self._episode_layers, self._reset_seed = tuple(state.guidance), state.seed
        self._log, self._terminated, self._last_observation = log, state.terminated, last_observation

    # -- Episode ---------------------------------------------------------------------------------
    def _new_episode_dir(self) -> Path:
        """A fresh workspace for the next episode (the last one's removed); its root."""
        self._close_episode()
        self._episode_dir = tempdirs.make(f"episode_{self.task.id}")
        root = Path(self._episode_dir.name) / "workspace"
        root.mkdir()
        self.workspace = Workspace(root, read_only={"baseline.py"})
        return self.workspace.root

    def _reset(self, seed: int | None, options: dict[str, Any] | None):
        super().reset(seed=seed)
        self._episode_layers = parse_guidance((options or {}).get("guidance", self.guidance_layers))
        root = self._new_episode_dir()
        baseline_source = self.task.baseline_path.read_text()
        if self.mode == "solution":  # a design episode writes no code
            self.workspace.write("solution.py", SOLUTION_STUB)
        baseline = root / "baseline.py"
        baseline.write_text(baseline_source)
        baseline.chmod(stat.S_IRUSR | stat.S_IRGRP | stat.S_IROTH)
        self._log = ActionLog()
        self._terminated = False
        self._reset_seed = seed
        if self.mode == "design":
            prompt = build_design_prompt(self.task, self._episode_layers, baseline_source, self.max_steps)
        else:
            note = rewards.NOTES[self.reward_kind] + ("" if self.backend == "cuda" else rewards.INTERPRETER_NOTE)
            prompt = build_prompt(self.task, self._episode_layers, baseline_source, self.backend, self.max_steps, note)
        return self._observe(prompt), self._info()

    def _step(self, action: str | dict):
        self._require_episode("step")
        ended = self._ended()
        if ended is not None:
            return ended
        # A dict action runs from its JSON text, as a text action would: one parser for both.
        text = action if isinstance(action, str) else _action_text(action)
        try:
            call = parse_action(text, self.mode)
        except ActionError as exc:
            return self._refuse(Refusal.of(text, str(exc)))
        except Exception as exc:  # noqa: BLE001 - last resort: a bad action must never break step()
            return self._refuse(Refusal.of(text, f"the action could not be read ({type(exc).__name__}). "
                                                 f"{format_note(self.mode)}"))
        try:
            observation, result = getattr(self, f"_tool_{call.tool}")(**call.args)
        except WorkspaceError as exc:  # the workspace is as it was (Workspace's contract): a refusal
            return self._refuse(Refusal.of(text, str(exc)), tool=call.tool)
        self._log.add_call(call)
        info: dict[str, Any] = {"tool": call.tool}
        if result is not None:
            info["evaluation"] = result.to_dict()
            info["verdict"] = observation
            info["queue"] = dict(result.queue)
            # The design properties' automatic findings (EvalResult.properties): reported, never in the reward.
            info["properties"] = result.properties
        if call.tool == "submit_design":
            self._terminated = True
            info["design"] = call.args["design"]
        reward = 0.0
        if call.tool == "submit":
            self._terminated = True
            reward = rewards.submission_reward(self.reward_kind, result)
            observation += f"\n\nSubmitted. Reward: {reward:.4f} ({self.reward_kind})."
        return self._outcome(observation, reward, info)

    def _ended(self):
        """The step's answer when the episode is over (submitted, or its budget used up), else None."""
        if self._terminated:
            text = (f"The episode has ended (the {'design' if self.mode == 'design' else 'solution'} was submitted). "
                    "Call reset() to start a new one.")
            return self._observe(text), 0.0, True, False, self._info(error="episode already ended")
        if len(self._log) >= self.max_steps:  # whether or not a TimeLimit wrapper stops the caller
            text = (f"The episode has ended (its budget of {self.max_steps} steps is used up). Call reset() "
                    "to start a new one.")
            return self._observe(text), 0.0, False, True, self._info(error="step budget used up")
        return None

    def _refuse(self, refusal: Refusal, **info: Any):
        self._log.add_refusal(refusal)
        return self._outcome(f"ERROR: {refusal.message}", 0.0, {**info, "error": refusal.message})

    def _outcome(self, text: str, reward: float, info: dict[str, Any]):
        # The budget is the env's own too (the prompt states it), not only registration's TimeLimit.
        truncated = not self._terminated and len(self._log) >= self.max_steps
        return self._observe(text), float(reward), self._terminated, truncated, {**self._info(), **info}

    # -- Tools -----------------------------------------------------------------------------------
    def _tool_list_files(self):
        rows = [f"{path}  ({size} bytes){'  [read-only]' if path in self.workspace.read_only else ''}"
                for path, size in self.workspace.list_files()]
        return "\n".join(rows) or "(the workspace is empty)", None

    def _tool_read_file(self, path: str, start: int | None = None, end: int | None = None):
        text = self.workspace.read(path)
        # Lines are what str_replace counts: split at \n only (a final \n ends the last line).
        lines = text.split("\n")[:-1] if text.endswith("\n") else text.split("\n") if text else []
        crlf = any(line.endswith("\r") for line in lines)
        lines = [line[:-1] if line.endswith("\r") else line for line in lines]
        first, last = start or 1, min(end or len(lines), len(lines))
        if first > max(len(lines), 1):
            raise WorkspaceError(f"{path!r} has {len(lines)} lines; start={first} is past the end")
        notes = []
        if crlf:
            notes.append("Its lines end in CRLF (\\r\\n), shown here as \\n: str_replace's old and new need "
                         "\\r\\n line ends.")
        if escaped(text) != text:
            notes.append("Characters this view cannot show (control characters, emoji and others beyond "
                         "Unicode's Basic Multilingual Plane) appear as \\xNN, \\uNNNN or \\UNNNNNNNN escapes; "
                         "the file holds the characters themselves, and str_replace needs them as such.")
        body = "\n".join(f"{i:>5}  {lines[i - 1]}" for i in range(first, last + 1))
        return "\n".join([f"{path}, lines {first}-{last} of {len(lines)}:", *notes, body]), None

    def _tool_write_file(self, path: str, content: str):
        n = self.workspace.write(path, content)
        return f"Wrote {n} bytes to {path}.", None

    def _tool_str_replace(self, path: str, old: str, new: str):
        line = self.workspace.str_replace(path, old, new)
        return f"Replaced one occurrence in {path} (at line {line}).", None

    def _evaluate(self, mode: str, workloads: list[str] | None = None, seed: int | None = None):
        names = {w.name for w in (self.task.workloads if self.backend == "cuda" else self.task.smoke_workloads)}
        unknown = [w for w in workloads or [] if w not in names]
        if unknown:
            raise WorkspaceError(f"unknown workload(s) {unknown}; this backend evaluates {sorted(names)}")
        if seed is None:
            seed = int(self.np_random.integers(0, 2**63 - 1))
        try:
            source = read_solution(self.workspace.root / "solution.py")
        except UnreadableSolution as exc:
            return EvalResult(mode, self.backend, error=str(exc))
        try:
            job = EvalJob(self.task.id, source, mode, workloads, seed,
                          cache_dir=self._cache(), client=self._client,
                          **{k: v for k, v in self.evaluator_options.items() if k in self.JOB_OPTIONS})
            result = self._evaluation_service().submit(job, self.task).result()
        except Exception as exc:  # noqa: BLE001 - a harness failure must not escape step(); it scores 0
            result = EvalResult(mode, self.backend,
                                error=f"the evaluation itself failed ({type(exc).__name__}: {exc}); nothing "
                                      "counts from it. This is a harness error: please report it.")
        return result

    def _evaluation_service(self) -> EvaluationService:
        """The service evaluations go to (the env's own is made at its first evaluation)."""
        if self._service is None:
            options = {k: v for k, v in self.evaluator_options.items() if k not in self.JOB_OPTIONS}
            if self._service_choice == "ray":
                self._service = make_service("ray", self.backend, **options)
            else:
                self._service = make_service("local", self.backend, **{"jobs": 1, "lanes_per_gpu": 1, **options})
        return self._service

    def _cache(self) -> str:
        """The env's Triton cache, kept across its episodes."""
        if self._cache_dir is None:
            self._cache_dir = tempdirs.make(f"cache_{self.task.id}")
        return self._cache_dir.name

    def _tool_run_tests(self):
        result = self._evaluate("test")
        return format_result(result, "run_tests: correctness on every workload"), result

    def _tool_benchmark(self, workloads: list[str] | None = None):
        result = self._evaluate("benchmark", workloads)
        return format_result(result, "benchmark: correctness and speed against the baseline"), result

    def _tool_profile(self, workload: str):
        result = self._evaluate("profile", [workload])
        return format_result(result, f"profile: GPU kernels of solution.py on {workload}"), result

    def _tool_submit(self):
        result = self._evaluate("submit", seed=secrets.randbits(63))
        return format_result(result, "submit: final evaluation on fresh secret inputs"), result

    def _tool_submit_design(self, design: str):
        if not design.strip():
            raise WorkspaceError("submit_design needs the design itself: the design argument is empty")
        return (f"Design submitted ({len(design)} characters). The episode has ended; a judge grades the design "
                "against the task's design properties."), None

    # -- Helpers ---------------------------------------------------------------------------------
    def _observe(self, text: str) -> str:
        self._last_observation = to_observation(text)
        return self._last_observation

    def _info(self, **extra) -> dict[str, Any]:
        return {"task": self.task.id, "backend": self.backend, "mode": self.mode,
                "guidance": list(self._episode_layers),
                "steps": len(self._log), "max_steps": self.max_steps, "reward_version": rewards.REWARD_VERSION, **extra}

    def _require_episode(self, call: str) -> None:
        if self.workspace is None:
            raise gym.error.ResetNeeded(f"no episode is running (the env is closed or was never reset): call "
                                        f"reset() before {call}()")

    def _close_episode(self) -> None:
        if self._episode_dir is not None:
            self._episode_dir.cleanup()
            self._episode_dir = None
        self.workspace = None
