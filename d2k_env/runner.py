"""Experiments: a policy on tasks x guidance conditions x seeds, one trajectory file per episode.

A run directory holds ``run.json`` (the settings every compared episode shares: backend, reward,
step budget), ``episodes/`` (one trajectory per finished or failed episode, see
:mod:`d2k_env.trajectory`) and ``.lock`` (held while a run writes there). Running the same
experiment again resumes it: finished episodes are kept and skipped, failed ones run again, and
``.tmp`` files left by an interrupted run are deleted. Each episode has its own env and policy;
``jobs`` episodes run at once in threads (evaluations are child processes, model calls are I/O).

A run's ``mode`` is its episodes' (``solution``, or ``design`` for design-only episodes, see
:class:`d2k_env.env.KernelEnv`); one run directory holds one mode. Every step records the automatic
findings on the task's design properties its evaluation made; the summary records each property's
finding on the submission. With a ``judge`` (:class:`d2k_env.judge.Judge`), the submitted solution,
or in design mode the submitted design, is judged as the episode ends and the verdict goes into the
summary (a judge that fails records its error there: the episode still finished). Run again with a
judge, the experiment also judges its finished episodes that carry no verdict (run without a judge,
or whose judge failed), rewriting their files whole. Neither ever changes the reward.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import platform
import threading
import time
import traceback
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable, Iterable, Sequence

import gymnasium as gym

from d2k_env.agents.base import Policy, TokenUsage
from d2k_env.chat_format import clip_middle
from d2k_env.env import MAX_STEPS, parse_guidance
from d2k_env.evaluator import resolve_backend
from d2k_env.progress import ProgressReporter, progress_reporter
from d2k_env.registration import env_id
from d2k_env.service import EvaluationService, make_service
from d2k_env.reward import REWARD_VERSION, check_reward_kind
from d2k_env.task import load_task
from d2k_env.tools import toolset
from d2k_env.trajectory import (FORMAT_VERSION, TMP_SUFFIX, EpisodeKey, TrajectoryError, TrajectoryWriter,
                                episodes_dir, read_trajectory)
from d2k_env.verdict import geomean

RUN_FILE = "run.json"
STACKING = ("none", "L1", "L1+L2", "L1+L2+L3")  # the cumulative guidance conditions, in order


@dataclass(frozen=True)
class RunSettings:
    """What every episode of a run shares. ``observation_chars`` clips observations stored in
    trajectories (0 keeps them whole); it does not change what the policy sees. ``mode``: the
    episodes' (``solution`` or ``design``)."""

    backend: str = "auto"
    reward: str = "speedup"
    max_steps: int = MAX_STEPS
    observation_chars: int = 50_000
    mode: str = "solution"

    def __post_init__(self):
        object.__setattr__(self, "backend", resolve_backend(self.backend))
        check_reward_kind(self.reward)
        if self.max_steps < 1:
            raise ValueError("max_steps must be >= 1")
        if self.observation_chars < 0:
            raise ValueError("observation_chars must be >= 0")
        toolset(self.mode)  # a ValueError naming the modes for any other

    def compared(self) -> dict[str, Any]:
        """The settings that must not change within a run directory."""
        return {"backend": self.backend, "reward": self.reward, "max_steps": self.max_steps, "mode": self.mode}


def condition_name(guidance: str | Sequence[str]) -> str:
    """Canonical condition: ``none`` or the layers joined by ``+`` (``l2+L1`` -> ``L1+L2``)."""
    return "+".join(parse_guidance(guidance)) or "none"


def plan(policy: str, tasks: Iterable[str], conditions: Iterable[str], seeds: Iterable[int]) -> list[EpisodeKey]:
    """Every (task, condition, seed) for ``policy``, each once, tasks checked to exist."""
    tasks, conditions, seeds = list(dict.fromkeys(tasks)), list(dict.fromkeys(map(condition_name, conditions))), \
        list(dict.fromkeys(seeds))
    for task in tasks:
        load_task(task)
    if not (tasks and conditions and seeds):
        raise ValueError("an experiment needs at least one task, one guidance condition and one seed")
    return [EpisodeKey(policy, t, c, s) for t in tasks for c in conditions for s in seeds]


class RunCallback:
    """Hooks called as a run progresses (from episode threads: implementations must be thread-safe)."""

    def on_run_start(self, planned: int, skipped: int) -> None: ...
    def on_episode_start(self, key: EpisodeKey) -> None: ...
    def on_step(self, key: EpisodeKey, record: dict[str, Any]) -> None: ...
    def on_episode_end(self, key: EpisodeKey, header: dict[str, Any], summary: dict[str, Any]) -> None: ...
    def on_episode_stopped(self, key: EpisodeKey) -> None: ...  # interrupted; its trajectory discarded
    def on_interrupt(self) -> None: ...


@dataclass
class RunResult:
    planned: int = 0
    skipped: int = 0
    finished: list[EpisodeKey] = field(default_factory=list)
    failed: list[tuple[EpisodeKey, str]] = field(default_factory=list)
    interrupted: bool = False
    judged: list[EpisodeKey] = field(default_factory=list)  # finished earlier, judged by this run


class RunDirectoryError(RuntimeError):
    """The run directory is in use by another run."""


class Interrupted(Exception):
    """The run was asked to stop; the episode's partial trajectory is discarded."""


class RunDirectory:
    """Exclusive use of a run directory: lock, settings check, stale ``.tmp`` cleanup."""

    def __init__(self, path: str | Path, settings: RunSettings):
        self.path = Path(path)
        self.settings = settings
        self._lock = None
        # What the reward-version check read of each episode file, for status() to reuse while the
        # file is unchanged: file name -> ((mtime_ns, size), key, status). A resumed run reads each
        # file once.
        self._read: dict[str, tuple[tuple[int, int], EpisodeKey, str]] = {}

    def __enter__(self) -> "RunDirectory":
        episodes_dir(self.path).mkdir(parents=True, exist_ok=True)
        self._lock = open(self.path / ".lock", "a+")
        try:
            fcntl.flock(self._lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            self._lock.seek(0)
            holder = self._lock.read().strip() or "another process"
            self._lock.close()
            raise RunDirectoryError(f"{self.path} is in use by a running `d2k run` ({holder}); wait for it or stop it") from None
        self._lock.truncate(0)
        self._lock.write(f"pid {os.getpid()}\n")
        self._lock.flush()
        try:
            self._check_settings()
        except BaseException:
            self.__exit__()
            raise
        for tmp in episodes_dir(self.path).glob("*" + TMP_SUFFIX):
            tmp.unlink()
        return self

    def __exit__(self, *exc) -> None:
        if self._lock is not None:
            fcntl.flock(self._lock, fcntl.LOCK_UN)
            self._lock.close()
            self._lock = None

    def _check_settings(self) -> None:
        meta = self.read_meta()
        if not meta:
            self.write_meta({"format": FORMAT_VERSION, "created": _now(), "settings": self.settings.compared()})
            return
        # Run directories made before modes were are solution runs.
        if {"mode": "solution", **(meta.get("settings") or {})} != self.settings.compared():
            raise ValueError(f"{self.path} was started with {meta.get('settings')}; this run asks for "
                             f"{self.settings.compared()}. Episodes compared in one directory must share them: "
                             "use another run directory")
        self._check_reward_version()

    def _check_reward_version(self) -> None:
        """Refuse to add episodes beside finished ones scored under another reward version: a resumed
        run would mix scores that cannot be compared (and skip the old episodes as done)."""
        older: dict[Any, list[str]] = {}
        for path in sorted(episodes_dir(self.path).glob("*.jsonl")):
            try:
                trajectory = self._trajectory(path)
            except TrajectoryError:
                continue  # said, with what to do, when its episode's turn comes
            version = trajectory.header.get("reward_version")
            if version != REWARD_VERSION and trajectory.summary.get("status") == "finished":
                older.setdefault(version, []).append(path.name)
        if older:
            found = "; ".join(f"{len(names)} under reward version {'(none recorded)' if v is None else v} "
                              f"(e.g. {names[0]})" for v, names in older.items())
            raise ValueError(f"{self.path} holds finished episodes scored by another version of the reward: "
                             f"{found}. This d2k-env scores under reward version {REWARD_VERSION}, and scores of "
                             "two versions are not comparable. Use another run directory, or move those "
                             "episode files out of episodes/ to play them again here")

    def read_meta(self) -> dict[str, Any]:
        path = self.path / RUN_FILE
        if not path.exists():
            return {}
        try:
            return json.loads(path.read_text())
        except json.JSONDecodeError as exc:
            raise ValueError(f"{path} is not valid JSON ({exc.msg}); fix or delete it") from None

    def write_meta(self, meta: dict[str, Any]) -> None:
        tmp = self.path / (RUN_FILE + ".tmp")
        tmp.write_text(json.dumps(meta, indent=2) + "\n")
        os.replace(tmp, self.path / RUN_FILE)

    def episode_path(self, key: EpisodeKey) -> Path:
        return episodes_dir(self.path) / key.filename

    def status(self, key: EpisodeKey) -> str | None:
        """``finished`` or ``failed`` for an episode with a final file, else ``None``."""
        path = self.episode_path(key)
        if not path.exists():
            return None
        known = self._read.get(path.name)
        if known is not None and known[0] == _stamp(path):
            held, status = known[1], known[2]
        else:
            try:
                trajectory = self._trajectory(path)
            except TrajectoryError as exc:
                raise TrajectoryError(f"{exc}; delete that file to run the episode again") from None
            held, status = trajectory.key, trajectory.summary["status"]
        if held != key:
            raise TrajectoryError(f"{path} holds {held}, not {key}; delete it to run the episode again")
        return status

    def _trajectory(self, path: Path):
        """The trajectory in ``path``, its key and status kept for :meth:`status`."""
        stamp = _stamp(path)
        trajectory = read_trajectory(path)
        self._read[path.name] = (stamp, trajectory.key, trajectory.summary["status"])
        return trajectory


def _stamp(path: Path) -> tuple[int, int]:
    info = path.stat()
    return info.st_mtime_ns, info.st_size


def run_experiment(run_dir: str | Path, keys: Sequence[EpisodeKey], make_policy: Callable[[EpisodeKey], Policy],
                   settings: RunSettings, jobs: int = 1, callbacks: Sequence[RunCallback] = (),
                   stop: threading.Event | None = None, service: EvaluationService | None = None,
                   progress: str | ProgressReporter = "auto", judge=None) -> RunResult:
    """Run every episode of ``keys`` not yet finished in ``run_dir``.

    ``progress`` says how the run reports itself as it goes (see :mod:`d2k_env.progress`):
    ``"auto"`` (a live bar on a terminal, plain lines on standard error otherwise), ``"rich"``,
    ``"lines"``, ``"quiet"``, or a reporter made by :func:`~d2k_env.progress.progress_reporter`
    (e.g. to write elsewhere). ``callbacks`` receive every event as well, reporter or not.

    Ctrl-C (or ``stop.set()``) stops cleanly: no new episode starts, running ones stop at their next
    step and leave nothing behind; a second Ctrl-C while waiting for them propagates.

    The episodes share one evaluation service, ``service`` when given (the caller closes it), else
    a :class:`~d2k_env.service.LocalService` made here for the run: ``jobs`` lanes on the
    interpreter, two per GPU on the GPU (timed evaluations still have their GPU to themselves).

    ``judge``: a :class:`d2k_env.judge.Judge` that grades each episode's submission (see the module
    docstring), and, once the new episodes are done, those finished earlier without a verdict
    (:attr:`RunResult.judged`); the caller closes it.
    """
    if jobs < 1:
        raise ValueError("jobs must be >= 1")
    reporter = progress if isinstance(progress, ProgressReporter) else progress_reporter(progress)
    callbacks = [reporter, *callbacks] if reporter is not None else list(callbacks)
    stop = stop or threading.Event()
    result = RunResult(planned=len(keys))
    own = service is None
    with RunDirectory(run_dir, settings) as directory, \
            contextlib.ExitStack() as stack:
        if own:
            service = make_service("local", settings.backend, jobs=jobs)
            stack.callback(service.close)
        if reporter is not None:
            stack.enter_context(reporter)
        todo = [k for k in keys if directory.status(k) != "finished"]
        result.skipped = len(keys) - len(todo)
        for cb in callbacks:
            cb.on_run_start(len(keys), result.skipped)
        lock = threading.Lock()

        def one(key: EpisodeKey) -> None:
            if stop.is_set():
                return
            summary = _run_and_record(key, make_policy, settings, directory.episode_path(key), callbacks, stop,
                                      service, judge)
            if summary is None:
                return
            with lock:
                if summary["status"] == "finished":
                    result.finished.append(key)
                else:
                    result.failed.append((key, summary["error"]))

        pool = ThreadPoolExecutor(max_workers=jobs, thread_name_prefix="d2k-episode")
        futures = [pool.submit(one, k) for k in todo]
        try:
            for future in as_completed(futures):
                future.result()
        except KeyboardInterrupt:
            stop.set()
            for cb in callbacks:
                cb.on_interrupt()
            pool.shutdown(wait=True, cancel_futures=True)
        except BaseException:  # e.g. a callback failed: stop the others before the lock is released
            stop.set()
            pool.shutdown(wait=True, cancel_futures=True)
            raise
        else:
            pool.shutdown(wait=True)
        if judge is not None and not stop.is_set():
            new = set(todo)
            skipped = [k for k in keys if k not in new]
            result.judged = judge_earlier(directory, skipped, settings.mode, judge, stop)
        result.interrupted = stop.is_set()
    return result


def _run_and_record(key, make_policy, settings, path, callbacks, stop, service=None,
                    judge=None) -> dict[str, Any] | None:
    """One episode into its trajectory file; ``None`` when interrupted (the file is discarded)."""
    writer = TrajectoryWriter(path)
    for cb in callbacks:
        cb.on_episode_start(key)
    try:
        header, summary = run_episode(key, make_policy, settings, writer, callbacks, stop, service, judge)
    except Interrupted:
        writer.discard()
        for cb in callbacks:
            cb.on_episode_stopped(key)
        return None
    except BaseException:
        writer.discard()
        raise
    writer.commit()
    for cb in callbacks:
        cb.on_episode_end(key, header, summary)
    return summary


def run_episode(key: EpisodeKey, make_policy: Callable[[EpisodeKey], Policy], settings: RunSettings,
                writer: TrajectoryWriter, callbacks: Sequence[RunCallback] = (),
                stop: threading.Event | None = None,
                service: EvaluationService | None = None, judge=None) -> tuple[dict[str, Any], dict[str, Any]]:
    """Play one episode, writing its header, steps and summary; returns (header, summary).

    Any error of the policy or the env ends the episode as ``failed`` with the error recorded;
    :class:`Interrupted` is raised when ``stop`` is set between steps. ``judge`` grades the
    submission of a finished episode (:func:`judge_submission`).
    """
    header: dict[str, Any] = {
        "type": "header", "format": FORMAT_VERSION, "policy": key.policy, "task": key.task,
        "condition": key.condition, "guidance": list(parse_guidance(key.condition)), "seed": key.seed,
        **settings.compared(), "reward_version": REWARD_VERSION, "observation_chars_limit": settings.observation_chars,
        "versions": versions(), "gpu": gpu_name(settings.backend), "start_time": _now(),
        "policy_settings": None, "prompt": None, "judge": judge.describe() if judge is not None else None,
    }
    steps, total_reward, submission, code, found, design = 0, 0.0, None, None, None, None
    terminated = truncated = False
    start = time.monotonic()
    policy: Policy | None = None
    env = None
    error = trace = None
    try:
        try:
            policy = make_policy(key)
            header["policy_settings"] = policy.describe()
            env = gym.make(env_id(key.task), backend=settings.backend, guidance=key.condition,
                           reward=settings.reward, max_steps=settings.max_steps,
                           max_episode_steps=settings.max_steps, evaluator=service, mode=settings.mode)
            observation, info = env.reset(seed=key.seed)
            header["prompt"] = observation
        finally:
            writer.write(header)
        while not (terminated or truncated):
            if stop is not None and stop.is_set():
                raise Interrupted
            used = TokenUsage(**asdict(policy.usage))
            t0 = time.monotonic()
            action = policy(observation)
            t1 = time.monotonic()
            observation, reward, terminated, truncated, info = env.step(action)
            t2 = time.monotonic()
            steps += 1
            total_reward += reward
            record = {"type": "step", "index": steps, "action": action, "model_output": policy.last_output,
                      "observation": _stored(observation, settings.observation_chars),
                      "observation_chars": len(observation), "reward": reward, "terminated": terminated,
                      "truncated": truncated, "tool": info.get("tool"), "error": info.get("error"),
                      "evaluation": info.get("evaluation"), "wall_s": t2 - t0, "policy_s": t1 - t0,
                      "env_s": t2 - t1, "tokens": policy.usage.minus(used).to_dict(),
                      "properties": info.get("properties")}
            if info.get("tool") == "submit" and "evaluation" in info:
                submission, code, found = info["evaluation"], _solution(env), info.get("properties") or {}
            if "design" in info:
                design = info["design"]
            writer.write(record)
            for cb in callbacks:
                cb.on_step(key, record)
    except Interrupted:
        raise
    except Exception as exc:  # noqa: BLE001 - any failure is recorded in the trajectory
        error, trace = f"{type(exc).__name__}: {exc}", traceback.format_exc(limit=-4)
    finally:
        for closer in (env, policy):
            if closer is not None:
                try:
                    closer.close()
                except Exception:  # noqa: BLE001 - closing must not hide the episode's outcome
                    pass
    task = load_task(key.task)
    if settings.mode == "design":
        outcome = {**submission_metrics(None), "submitted": design is not None, "correct": None,
                   "submitted_design": design}
    else:
        outcome = {**submission_metrics(submission), "submitted_code": code}
    verdict = None
    if judge is not None and not error:
        verdict = judge_submission(judge, task, settings.mode, code if settings.mode == "solution" else design, found)
    summary = {"type": "summary", "status": "failed" if error else "finished", "error": error, "traceback": trace,
               "total_reward": total_reward, "steps": steps, "terminated": terminated, "truncated": truncated,
               **outcome, "properties": property_records(task, settings.mode, submission is not None, found),
               "judge": verdict,
               "tokens": policy.usage.to_dict() if policy is not None else TokenUsage().to_dict(),
               "wall_s": time.monotonic() - start, "end_time": _now()}
    writer.write(summary)
    return header, summary


def property_records(task, mode: str, submitted: bool, found: dict[str, dict] | None) -> list[dict[str, Any]]:
    """Each of the task's design properties as the summary records it: id, layer, text, its
    automatic check (None: the judge's alone) and the automatic finding on the submission
    (``status``, ``detail``). A checked property without a finding is ``unchecked``, saying why (not
    submitted; no workload reached the replay); in a design episode nothing ran, so there are no
    findings (``status`` None)."""
    records = []
    for p in task.spec.design_properties:
        status = detail = None
        if mode == "solution" and p.check is not None:
            if not submitted:
                status, detail = "unchecked", "nothing was submitted"
            elif p.id in (found or {}):
                status, detail = found[p.id]["status"], found[p.id]["detail"]
            else:
                status, detail = "unchecked", "no workload of the submission reached the replay"
        records.append({"id": p.id, "layer": p.layer, "text": p.text,
                        "check": p.check.describe() if p.check else None, "status": status, "detail": detail})
    return records


def judge_submission(judge, task, mode: str, text: str | None, found: dict[str, dict] | None) -> dict[str, Any]:
    """The judge's verdict on a submission as the summary records it (:meth:`Verdict.to_dict`), or
    ``{"error": ...}`` saying why there is none: nothing submitted, the task has no properties, or
    the judge failed (its budget spent, its server unreachable after retries)."""
    from d2k_env.tasks.properties import Finding

    if text is None:
        return {"error": f"nothing was submitted: no {'design' if mode == 'design' else 'solution'} to judge"}
    if not task.spec.design_properties:
        return {"error": f"task {task.id} has no design properties: nothing to judge"}
    findings = {pid: Finding(f["status"], f["detail"]) for pid, f in (found or {}).items()}
    try:
        return judge.judge(task, text, findings, kind=mode).to_dict()
    except Exception as exc:  # noqa: BLE001 - a judge's failure is recorded; the episode itself finished
        return {"error": f"{type(exc).__name__}: {exc}"}


def judge_earlier(directory: RunDirectory, keys: Sequence[EpisodeKey], mode: str, judge,
                  stop: threading.Event | None = None) -> list[EpisodeKey]:
    """Judges the finished episodes of ``keys`` whose summary holds no verdict, from what it
    recorded (the submission and its findings), and rewrites each one's file whole (the header
    naming the judge, the summary holding the verdict). Skipped: episodes that submitted nothing,
    and those written before findings were recorded (the judge would not know what the checks
    settled). The episodes judged, in order."""
    judged = []
    for key in keys:
        if stop is not None and stop.is_set():
            break
        path = directory.episode_path(key)
        t = read_trajectory(path)
        records, earlier = t.summary.get("properties"), t.summary.get("judge") or {}
        text = t.summary.get("submitted_design" if mode == "design" else "submitted_code")
        if not t.finished or records is None or text is None or earlier.get("properties") is not None:
            continue
        found = {r["id"]: {"status": r["status"], "detail": r["detail"]} for r in records if r["status"]}
        verdict = judge_submission(judge, load_task(key.task), mode, text, found)
        if verdict == t.summary.get("judge"):
            continue  # the same error again: nothing to rewrite
        writer = TrajectoryWriter(path)
        try:
            for record in ({**t.header, "judge": judge.describe()}, *t.steps, {**t.summary, "judge": verdict}):
                writer.write(record)
        except BaseException:
            writer.discard()
            raise
        writer.commit()
        judged.append(key)
    return judged


def submission_metrics(evaluation: dict[str, Any] | None) -> dict[str, Any]:
    """Correctness, geomean speedup and roofline fraction of a submit evaluation (``None`` if untimed)."""
    if evaluation is None:
        return {"submitted": False, "correct": False, "timed": False, "speedup": None, "roofline_fraction": None}
    correct, timed = bool(evaluation.get("correct")), bool(evaluation.get("timed"))
    workloads = [w for w in evaluation.get("workloads") or [] if not w.get("heldout")]  # held-out: never timed
    speedups = [w["speedup"] for w in workloads if w.get("speedup")]
    fractions = [w["roofline_fraction"] for w in workloads if w.get("roofline_fraction")]
    usable = correct and timed and workloads
    return {"submitted": True, "correct": correct, "timed": timed,
            "speedup": geomean(speedups) if usable and len(speedups) == len(workloads) else None,
            "roofline_fraction": geomean(fractions) if usable and len(fractions) == len(workloads) else None}


def _stored(observation: str, limit: int) -> str:
    return observation if not limit or len(observation) <= limit else clip_middle(observation, limit)


def _solution(env) -> str | None:
    try:
        return env.unwrapped.workspace.read("solution.py")
    except Exception:  # noqa: BLE001 - the agent may have deleted or bloated it
        return None


def versions() -> dict[str, str]:
    import torch

    import d2k_env

    found = {"python": platform.python_version(), "torch": torch.__version__, "gymnasium": gym.__version__,
             "d2k_env": d2k_env.__version__}
    try:
        import triton
        found["triton"] = triton.__version__
    except ImportError:
        pass
    return found


def gpu_name(backend: str) -> str | None:
    if backend != "cuda":
        return None
    import torch

    return torch.cuda.get_device_name(0)


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")
