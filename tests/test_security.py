"""The security suite: every file under tests/security/<class>/, checked as its header says.

Each file is an exploit, an honest probe or a template, in the folder of the threat it tests
(tests/exploits.py documents the header). Test ids name the file, ``<class>/<name>``, and for a
template the task too, ``<class>/<name>-<task>``: templates (``Task: every``) are instantiated for
every registered task, so a task added to the registry (or found through D2K_TASKS_PATH) gets them
with no test edited. No task is named in this module.

Per file: its header is well-formed; the static policy's verdict (``Policy``); the verdict with the
policy on (``Expect``) and bypassed (``Behind the policy``) on the interpreter, and the same on the
GPU (marked ``gpu``); and the special checks it names (``Check``, see ``CHECKS``): after a hang,
flood, crash or stray process the same Evaluator (its worker pool and Triton cache, given the
generous limits) still passes the reference; the secret seed never reaches the output; and the
attacks through the env's tools. Per task, after every case above, the
reference still passes on the Evaluator the exploits ran on, and the project's task tree is as it was.

Speed: one Evaluator per (task, backend, limits), shared by every case, and one worker pool per
backend; each evaluation is two fresh sandboxed processes (forked from a warm Python, see
d2k_env.evaluator.forkserver), so the selected ones run on a small thread pool (D2K_SECURITY_WORKERS,
default 2), started when the module starts (the hangs first, then in test order); each test waits
for its own.
Policy-refused evaluations start no process. Every evaluation has a fixed seed (``Seed:``, default 1).
"""

from __future__ import annotations

import ast
import hashlib
import os
import runpy
import shutil
import signal
import tempfile
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import gymnasium as gym
import pytest

import d2k_env
import d2k_env.evaluator
from conftest import call, serialised_ast_parse
from d2k_env.evaluator import Evaluator, PhaseLimits
from d2k_env.evaluator.policy import check_solution
from d2k_env.evaluator.pool import WorkerPool
from d2k_env.reward import submission_reward
from d2k_env.task import load_task, project_root, task_ids
from d2k_env.verdict import format_result
from exploits import (SECURITY, Exploit, assert_policy, assert_verdict, first_workload, discover, validate,
                      verdict_text)

WORKERS = int(os.environ.get("D2K_SECURITY_WORKERS", "2"))
SHORT_LIMIT_S = 10
HANG_LIMIT_S = 3
# Generous where nothing hangs: on a loaded 2-core machine honest slow solutions have taken over two
# minutes on the interpreter. A file that might hang but whose verdict normally comes first (Limits:
# short: a crash, a refused fork) gets a 10 s check phase, which that verdict must not race on a loaded
# machine; an endless loop (Limits: hang) gets 3 s: its check phase never ends, so the limit always
# fires and its length changes no verdict (waiting out 10 s cost two of them 20 s a task). The
# evaluation after a fault (the recovery) gets the generous limits on the same pool and Triton cache.
NORMAL_LIMITS = PhaseLimits({"load": 300, "check": 300, "verify": 300}, default=300)
SHORT_LIMITS = PhaseLimits({"load": 300, "check": SHORT_LIMIT_S, "verify": 300}, default=300)
HANG_LIMITS = PhaseLimits({"load": 300, "check": HANG_LIMIT_S, "verify": 300}, default=300)
LIMITS = {None: NORMAL_LIMITS, "short": SHORT_LIMITS, "hang": HANG_LIMITS}
SECRET = 0x5EC12E7_0DDBA11  # the seed the secret-seed checks pass, and look for in the output

EXPLOITS, BROKEN = discover()
BY_ID = {e.id: e for e in EXPLOITS}


# -- the evaluation pool -------------------------------------------------------------------------------

# Sources the static policy is bypassed for. Keyed by source text (each bypassed copy ends with a
# unique comment), so that evaluations of everything else running at the same time keep the policy.
BYPASS_POLICY: set[str] = set()


@dataclass
class Outcome:
    result: Any
    recovery: Any = None  # the reference's result right after a fault-type exploit
    workdir: Path | None = None
    started: list[str] = field(default_factory=list)  # pid files the solution's children wrote
    survivors: list[int] = field(default_factory=list)  # of those, pids alive after the evaluation
    markers: list[str] = field(default_factory=list)  # files written into MARKER_DIR


class Lab:
    """Evaluators per (task, backend, limits), one worker pool per backend that they share (its
    workers forked from the process's fork server) and a thread pool running evaluations ahead of
    the tests."""

    def __init__(self, workers: int):
        self.pool = ThreadPoolExecutor(max_workers=max(1, workers), thread_name_prefix="security")
        self.futures: dict[str, Future] = {}
        self.evaluators: dict[tuple[str, str, str | None, bool], Evaluator] = {}
        self.worker_pools: dict[str, WorkerPool] = {}
        self.lock = threading.Lock()
        self.tmp = Path(tempfile.mkdtemp(prefix="d2k-security-"))
        os.chmod(self.tmp, 0o755)

    def evaluator(self, task_id: str, backend: str = "interpreter", limits: str | None = None,
                  recovering: bool = False) -> Evaluator:
        """``limits``: None (the generous ones), ``short`` or ``hang`` (the header's ``Limits:``).
        ``recovering``: that evaluator's twin with the generous limits, on its worker pool and its
        Triton cache (what a fault could have left broken), for the evaluation after a fault, which
        must not race a short limit on a loaded machine."""
        with self.lock:
            return self._evaluator(task_id, backend, limits if backend == "interpreter" else None, recovering)

    def _evaluator(self, task_id: str, backend: str, limits: str | None, recovering: bool) -> Evaluator:
        if recovering and limits is None:
            recovering = False
        key = (task_id, backend, limits, recovering)
        if key not in self.evaluators:
            if backend not in self.worker_pools:
                self.worker_pools[backend] = WorkerPool(interpret=backend == "interpreter", spares=False)
            if recovering:
                ev = self._evaluator(task_id, backend, limits, False)
                self.evaluators[key] = Evaluator(ev.task, backend, cache_dir=ev.cache_dir, limits=NORMAL_LIMITS,
                                                 pool=ev.pool)
            else:
                self.evaluators[key] = Evaluator(load_task(task_id), backend,
                                                 limits=LIMITS[limits] if backend == "interpreter" else None,
                                                 pool=self.worker_pools[backend])
        return self.evaluators[key]

    def workdir(self, key: str) -> Path:
        d = self.tmp / "".join(c if c.isalnum() or c in "-_." else "_" for c in key)
        d.mkdir(parents=True, exist_ok=True)
        return d

    def submit(self, job: "Job") -> Future:
        with self.lock:
            if job.key not in self.futures:
                self.futures[job.key] = self.pool.submit(job.fn, self)
            return self.futures[job.key]

    def result(self, job: "Job") -> Any:
        return self.submit(job).result()

    def close(self) -> None:
        self.pool.shutdown(wait=True, cancel_futures=True)
        for ev in self.evaluators.values():
            ev.close()
        for pool in self.worker_pools.values():
            pool.close()
        shutil.rmtree(self.tmp, ignore_errors=True)


@dataclass(frozen=True)
class Job:
    key: str
    fn: Callable[[Lab], Any] = field(compare=False, hash=False, repr=False)
    first: bool = field(default=False, compare=False)  # a hang: started before the rest (see ``lab``)


def _materialise(lab: Lab, key: str, source: str, behind: bool) -> tuple[Path, Path, Path]:
    """The solution file of one evaluation, placeholders filled, in a directory of its own."""
    work = lab.workdir(key)
    pids, markers = work / "pids", work / "markers"
    for d in (pids, markers):
        d.mkdir(exist_ok=True)
        os.chmod(d, 0o755)
    source = source.replace("@PID_DIR@", str(pids)).replace("@MARKER_DIR@", str(markers))
    if behind:  # a unique last line, so that no other evaluation matches this source
        source += f"\n# the static policy is bypassed for this evaluation only: {work}\n"
        BYPASS_POLICY.add(source)
    path = work / "solution.py"
    path.write_text(source)
    return path, pids, markers


def run_job(exploit: Exploit, task_id: str, backend: str, behind: bool, *, mode: str | None = None,
            seed: int | None = None, recover: bool = False, tag: str = "") -> Job:
    """An evaluation of ``exploit`` for ``task_id`` as its header says (mode and seed overridable)."""
    mode = mode or exploit.mode(backend)
    seed = exploit.seed(backend) if seed is None else seed
    limits = exploit.limits if backend == "interpreter" else None
    key = f"{exploit.id}@{task_id}:{backend}:{'behind' if behind else 'policy'}:{mode}:{seed}{tag}"

    def fn(lab: Lab) -> Outcome:
        path, pids, markers = _materialise(lab, key, exploit.source(task_id), behind)
        ev = lab.evaluator(task_id, backend, limits)
        result = ev.evaluate(path, mode, workloads=exploit.workloads(backend, task_id), seed=seed)
        outcome = Outcome(result, workdir=path.parent)
        outcome.started = sorted(p.name for p in pids.glob("*.pid"))
        outcome.survivors = _alive_pids(pids)
        for pid in outcome.survivors:  # cleanup: only the pids our own exploit's children wrote
            _kill(pid)
        outcome.markers = sorted(p.name for p in markers.iterdir())
        if recover:
            recovering = lab.evaluator(task_id, backend, limits, recovering=True)
            outcome.recovery = recovering.evaluate(ev.task.reference_path, "test", workloads=[first_workload(task_id)],
                                                   seed=seed)
        return outcome

    return Job(key, fn, first=limits == "hang")


def _alive_pids(pid_dir: Path) -> list[int]:
    alive = []
    for f in pid_dir.glob("*.pid"):
        try:
            pid = int(f.read_text() or f.stem)
        except ValueError:
            continue
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            continue
        except PermissionError:
            pass
        if not _is_zombie(pid):
            alive.append(pid)
    return alive


def _is_zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except (OSError, IndexError):
        return False


def _kill(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


@pytest.fixture(scope="module", autouse=True)  # autouse: started before the module's first test
def lab(request):
    """Starts every selected evaluation of this module on the pool: the hangs first (each waits out its
    limit, and one left for the end would be the module's last seconds), then the rest in test order."""
    real_check = d2k_env.evaluator.check_solution

    def policy(source, *args, **kwargs):
        return [] if source in BYPASS_POLICY else real_check(source, *args, **kwargs)

    with pytest.MonkeyPatch.context() as mp, serialised_ast_parse():
        mp.setattr(d2k_env.evaluator, "check_solution", policy)
        lab = Lab(WORKERS)
        jobs = []
        for item in request.session.items:
            if item.module is not request.module or item.get_closest_marker("skip") or not hasattr(item, "callspec"):
                continue
            case = item.callspec.params.get("case")
            if isinstance(case, Case) and case.job is not None:
                jobs.append(case.job)
        for job in sorted(jobs, key=lambda j: not j.first):  # stable: test order otherwise
            lab.submit(job)
        yield lab
        lab.close()


# -- the cases -----------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Case:
    exploit: Exploit
    task: str
    job: Job | None = None
    backend: str = "interpreter"
    behind: bool = False

    def __str__(self) -> str:
        return case_id(self.exploit, self.task)

    @property
    def verdict(self):
        return self.exploit.verdict(self.backend, self.behind)


def case_id(exploit: Exploit, task_id: str) -> str:
    return f"{exploit.id}-{task_id}" if exploit.template else exploit.id


def _param(case: Case, gpu: bool = False):
    marks = [pytest.mark.gpu] if gpu else []
    if hole := case.exploit.fields.get("Hole"):
        marks.append(pytest.mark.xfail(strict=True, reason=f"HOLE: {hole}"))
    return pytest.param(case, id=str(case), marks=marks)


_VALID: dict[str, bool] = {}


def _valid(exploit: Exploit) -> bool:
    """Whether the file's header is well-formed (test_header_is_well_formed says why not)."""
    if exploit.id not in _VALID:
        try:
            validate(exploit, set(CHECKS))
            _VALID[exploit.id] = True
        except AssertionError:
            _VALID[exploit.id] = False
    return _VALID[exploit.id]


def run_cases(backend: str, behind: bool, paid: bool) -> list:
    """Evaluation cases on ``backend``, policy on or bypassed; ``paid``: those whose verdict is paid/correct."""
    out = []
    for e in EXPLOITS:
        if not _valid(e) or (v := e.verdict(backend, behind)) is None or (v.kind in ("paid", "correct")) != paid:
            continue
        for t in e.tasks:
            recover = "recovers" in e.checks and e.fault_run == (backend, behind)
            out.append(_param(Case(e, t, run_job(e, t, backend, behind, recover=recover), backend, behind),
                              gpu=backend == "cuda"))
    return out


def cases(factory: Callable[[], list]):
    """Parametrises a test with ``factory()``'s cases, once every check below is registered."""
    def mark(fn):
        fn._cases = factory
        return fn
    return mark


def policy_cases() -> list:
    return [_param(Case(e, t)) for e in EXPLOITS if _valid(e) and e.policy is not None for t in e.tasks]


# -- headers and the static policy ---------------------------------------------------------------------

@pytest.mark.parametrize("name", sorted([e.id for e in EXPLOITS] + list(BROKEN)))
def test_header_is_well_formed(name):
    """Each file starts with its header (tests/exploits.py); a broken one names the file and the field."""
    if name in BROKEN:
        raise BROKEN[name]
    exploit = BY_ID[name]
    validate(exploit, set(CHECKS))
    if exploit.klass in ("honest_corpus", "honest_refused"):
        _check_corpus_file(exploit)


def _check_corpus_file(exploit: Exploit) -> None:
    """A corpus file: its description is one line naming the idiom (or the capability), and it is a
    solution: a forward, and a kernel of its own."""
    tree = ast.parse(exploit.path.read_text())
    description = ast.get_docstring(tree).partition("\n\n")[2]
    start = "Idiom: " if exploit.klass == "honest_corpus" else "Capability: "
    assert "\n" not in description.strip() and description.startswith(start), exploit.id
    top = {n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.ClassDef))} | {
        t.id for n in tree.body if isinstance(n, ast.Assign) for t in n.targets if isinstance(t, ast.Name)}
    assert "forward" in top
    assert any(isinstance(d, ast.Attribute) and d.attr == "jit" for n in ast.walk(tree)
               if isinstance(n, ast.FunctionDef) for d in n.decorator_list)


def test_every_file_under_security_is_a_case():
    """Nothing under tests/security/ but case files and ROUNDS.md (the rounds' own notes)."""
    stray = [p for p in SECURITY.rglob("*") if p.is_file() and p.suffix != ".py" and "__pycache__" not in p.parts
             and p != SECURITY / "ROUNDS.md"]
    assert not stray, stray
    assert len(EXPLOITS) + len(BROKEN) == len(list(SECURITY.rglob("*.py")))


@cases(policy_cases)
def test_static_policy_verdict(case):
    source = case.exploit.source(case.task).replace("@PID_DIR@", "/nonexistent").replace("@MARKER_DIR@", "/nonexistent")
    assert_policy(check_solution(source, load_task(case.task).allowed_torch), case.exploit.policy)


# -- evaluations ---------------------------------------------------------------------------------------

def _assert_run(lab: Lab, case: Case) -> Outcome:
    outcome = lab.result(case.job)
    result = outcome.result
    assert_verdict(result, case.verdict, case.backend, format_result(result, str(case)))
    assert not outcome.markers, f"the solution wrote outside its workspace: {outcome.markers}"
    return outcome


@cases(lambda: run_cases("interpreter", behind=False, paid=False))
def test_exploit_scores_zero(lab, case):
    _assert_run(lab, case)


@cases(lambda: run_cases("interpreter", behind=False, paid=True))
def test_honest_solution_is_paid(lab, case):
    _assert_run(lab, case)


@cases(lambda: run_cases("interpreter", behind=True, paid=False) + run_cases("interpreter", behind=True, paid=True))
def test_behind_the_policy(lab, case):
    """The static policy bypassed: the run-time layer alone gives the verdict."""
    _assert_run(lab, case)


@cases(lambda: run_cases("cuda", behind=False, paid=False))
def test_exploit_scores_zero_on_gpu(lab, case):
    _assert_run(lab, case)


@cases(lambda: run_cases("cuda", behind=False, paid=True))
def test_honest_solution_is_paid_on_gpu(lab, case):
    _assert_run(lab, case)


@cases(lambda: run_cases("cuda", behind=True, paid=False) + run_cases("cuda", behind=True, paid=True))
def test_behind_the_policy_on_gpu(lab, case):
    _assert_run(lab, case)


# -- special checks, named in the headers (Check:) -------------------------------------------------------

CHECKS: dict[str, Callable] = {}


def check(name: str, job: Callable[[Exploit, str], Job] | None = None, gpu: bool = False):
    """Registers a test as the check ``name``: it is run for every file (and task) that names it.
    ``job`` makes the evaluation it needs, on the pool; without one the test runs on its own."""
    def register(fn):
        fn._check = (name, job, gpu)
        CHECKS[name] = fn
        return fn
    return register


def pytest_generate_tests(metafunc):
    if hasattr(metafunc.function, "_cases"):
        metafunc.parametrize("case", metafunc.function._cases())
        return
    spec = getattr(metafunc.function, "_check", None)
    if spec is None:
        return
    name, job, gpu = spec
    params = [_param(Case(e, t, job(e, t) if job else None), gpu=gpu) for e in EXPLOITS if _valid(e) and name in e.checks
              for t in e.tasks]
    metafunc.parametrize("case", params)


def _fault_job(e: Exploit, t: str) -> Job:
    backend, behind = e.fault_run
    return run_job(e, t, backend, behind, recover="recovers" in e.checks)


@check("recovers", _fault_job)
def test_fault_is_contained_and_the_evaluator_recovers(lab, case):
    """A hang, flood, crash or stray process ends the evaluation, and the same Evaluator then passes
    the task's reference."""
    outcome = lab.result(case.job)
    assert not outcome.result.correct or case.exploit.verdict(*case.exploit.fault_run) is None
    assert not outcome.survivors, f"processes outlived the evaluation: {outcome.survivors}"
    assert outcome.recovery.correct, format_result(outcome.recovery)


@check("output-clipped", _fault_job)
def test_flood_is_clipped(lab, case):
    outcome = lab.result(case.job)
    assert len(outcome.result.output) < 10_000 and "output clipped" in outcome.result.output, outcome.result.output[-2000:]


@check("no-child-process", _fault_job)
def test_no_child_process_starts_or_survives(lab, case):
    """On the interpreter the sandbox refuses every new process: no child ever starts (tests/test_sandbox.py
    tests the supervisor's reaping where processes are allowed, as on the GPU)."""
    outcome = lab.result(case.job)
    assert not outcome.started, f"children started despite the sandbox: {outcome.started}"
    assert not outcome.survivors


@check("held-out-only", lambda e, t: run_job(e, t, "interpreter", False))
def test_only_the_heldout_shapes_fail(lab, case):
    """Right on every published workload it was given, wrong on the held-out shapes that submit draws
    from the secret seed."""
    result = lab.result(case.job).result
    failing = [w for w in result.workloads if not w.correct]
    assert failing and all(w.heldout for w in failing), verdict_text(result)
    assert all(w.correct for w in result.workloads if not w.heldout), verdict_text(result)


@check("secret-seed", lambda e, t: run_job(e, t, "interpreter", False, mode="test", seed=SECRET))
def test_secret_seed_does_not_leak(lab, case):
    result = lab.result(case.job).result
    assert str(SECRET) not in result.output, "the solution read the secret seed and printed it"


@check("secret-seed-behind-the-policy", lambda e, t: run_job(e, t, "interpreter", True, mode="test", seed=SECRET + 1))
def test_secret_seed_does_not_leak_behind_the_policy(lab, case):
    result = lab.result(case.job).result
    assert str(SECRET + 1) not in result.output, "the solution read the secret seed and printed it"


def _episode(task_id: str, steps: list, **make) -> list:
    """Plays the steps (actions) in a fresh episode; returns [(observation, reward, info)] per step. A
    step may instead be a function, called with the env (its entry is None)."""
    env = gym.make(d2k_env.env_id(task_id), backend="interpreter", reward="speedup", **make)
    try:
        env.reset(seed=0)
        out = []
        for action in steps:
            if callable(action):
                out.append(action(env.unwrapped))
                continue
            obs, reward, terminated, truncated, info = env.step(action)
            out.append((obs, reward, info))
        return out
    finally:
        env.close()


def _env_job(name: str, steps: Callable[[Exploit, str], list], **make) -> Callable[[Exploit, str], Job]:
    def job(e: Exploit, t: str) -> Job:
        return Job(f"{name}:{case_id(e, t)}", lambda lab: _episode(t, steps(e, t), **make), first=e.limits == "hang")
    return job


@check("env-submit", _env_job("env-submit", lambda e, t: [call("write_file", path="solution.py", content=e.source(t)),
                                                          call("submit")]))
def test_env_submit_scores_zero(lab, case):
    """Through the env's tools: written with write_file and submitted, the exploit earns 0 and the
    observation names the rule."""
    obs, reward, info = lab.result(case.job)[-1]
    assert reward == 0.0 and "Submitted. Reward: 0.0000" in obs, obs
    expected = case.exploit.verdict("interpreter", False)
    assert any(all(t in obs for t in alt) for alt in expected.alternatives), obs
    assert not info["evaluation"]["correct"]


@check("env-run-tests", _env_job("env-run-tests", lambda e, t: [call("write_file", path="solution.py", content=e.source(t)),
                                                                call("run_tests")]))
def test_env_step_answers_with_a_verdict(lab, case):
    """env.step answers any solution text with a verdict, never an exception (a deep expression raised
    RecursionError out of the policy once)."""
    try:
        obs, reward, _ = lab.result(case.job)[-1]
    except (RecursionError, MemoryError) as exc:
        pytest.fail(f"env.step raised {type(exc).__name__}: {exc}")
    expected = case.exploit.verdict("interpreter", False)
    assert reward == 0 and any(all(t in obs for t in alt) for alt in expected.alternatives), obs


def _generous_limits(env) -> None:
    """The next evaluations of ``env`` get the generous limits: the reference after a hang must not
    race the hang's short limit on a loaded machine."""
    env.evaluator_options["limits"] = NORMAL_LIMITS


def _hang_then_recover(e: Exploit, t: str) -> list:
    return [call("write_file", path="solution.py", content=e.source(t)), call("run_tests"),
            call("write_file", path="solution.py", content=load_task(t).reference_path.read_text()),
            _generous_limits, call("benchmark", workloads=[first_workload(t)])]


@check("env-hang-recovers", _env_job("env-hang", _hang_then_recover, evaluator_options={"limits": HANG_LIMITS}))
def test_env_hang_is_killed_and_the_episode_goes_on(lab, case):
    """An endless loop in forward is killed at the phase limit, the step returns a verdict, and the same
    episode then evaluates the reference correctly."""
    steps = lab.result(case.job)
    obs, reward, _ = steps[1]
    first = load_task(case.task).smoke_workloads[0].name
    assert f"phase 'check' of workload {first} exceeded its {HANG_LIMIT_S} s limit" in obs and reward == 0, obs
    obs, _, info = steps[4]
    assert "PASSED" in obs and info["evaluation"]["correct"], obs


@check("env-forged-speedup", _env_job("env-forge", lambda e, t: [call("write_file", path="solution.py", content=e.source(t)),
                                                                 call("submit")]))
def test_env_forged_speedup_is_not_paid(lab, case):
    """A correct kernel whose result channel is forged to say 'timed, 100x' (the first version of this
    exploit was paid 100 on the interpreter): timings on a run that cannot time are void."""
    obs, reward, info = lab.result(case.job)[-1]
    assert reward <= 1.0, f"reward {reward} on a backend that cannot time"
    assert not info["evaluation"]["timed"]


def _pyc_plant(e: Exploit, t: str) -> list:
    src = e.source(t)
    decoy = next(n.value.value for n in ast.parse(src).body
                 if isinstance(n, ast.Assign) and getattr(n.targets[0], "id", "") == "DECOY")
    return [call("write_file", path="solution.py", content=src), call("run_tests"),
            call("write_file", path="solution.py", content=decoy), call("submit")]


@check("env-pyc-plant", _env_job("env-pyc", _pyc_plant))
def test_planted_bytecode_does_not_replace_later_solutions(lab, case):
    obs, reward, info = lab.result(case.job)[-1]
    assert reward == 0, f"a no-op decoy earned {reward}:\n{obs}"


def _grader_tampering(e: Exploit, t: str) -> Job:
    def fn(lab: Lab):
        """Against an Evaluator whose grading root is a temporary copy of the task tree, so that the
        real tree can never be the target."""
        root = lab.workdir(f"grader-root-{t}") / "root"
        for sub in ("tasks", "baselines", "references", "guidance"):
            shutil.copytree(project_root() / sub, root / sub, ignore=shutil.ignore_patterns("__pycache__"))
        task = load_task(t, str(root))
        ev = Evaluator(task, "interpreter", limits=NORMAL_LIMITS)
        grading_root = Path(getattr(ev, "grading_root", task.root))
        grading_baseline = grading_root / "baselines" / f"{task.id}.py"
        pristine = grading_baseline.read_text()
        path = lab.workdir(f"grader-root-{t}") / "solution.py"
        path.write_text(e.source(t).replace("@SAFE_ROOT@", str(grading_root)))
        try:
            result = ev.evaluate(path, workloads=[first_workload(t)], seed=e.seed("interpreter"))
            tampered = grading_baseline.read_text() != pristine
            after = ev.evaluate(task.reference_path, workloads=[first_workload(t)]) if tampered else None
        finally:
            ev.close()
        return result, tampered, after
    return Job(f"grader:{case_id(e, t)}", fn)


@check("grader-copy", _grader_tampering)
def test_grader_files_cannot_be_rewritten(lab, case):
    result, tampered, after = lab.result(case.job)
    assert not tampered, (f"the grading baseline was rewritten by the solution (which then "
                          f"{'passed' if result.correct else 'failed'}; the reference afterwards "
                          f"{'passed' if after.correct else 'FAILED'})")
    assert not result.correct


def _file_probe(e: Exploit, t: str) -> Job:
    def fn(lab: Lab):
        marker = Path("/tmp/d2k_holdout2_r07_marker.txt")
        marker.unlink(missing_ok=True)
        path, _, _ = _materialise(lab, f"file-probe:{case_id(e, t)}", e.source(t), False)
        result = lab.evaluator(t).evaluate(path, e.mode("interpreter"), workloads=e.workloads("interpreter", t),
                                           seed=e.seed("interpreter"))
        return result, marker.exists()
    return Job(f"file-probe:{case_id(e, t)}", fn)


@check("file-probe", _file_probe)
def test_file_probe_reads_and_writes_nothing(lab, case):
    result, written = lab.result(case.job)
    assert submission_reward("speedup", result) == 0
    assert "READ from the harness" not in result.output
    assert not written, "a solution wrote a file outside its workspace"


def _daemon(e: Exploit, t: str) -> Job:
    def fn(lab: Lab):
        pid_file = Path("/tmp/d2k_holdout_h33.pid")
        pid_file.unlink(missing_ok=True)
        path, _, _ = _materialise(lab, f"daemon:{case_id(e, t)}", e.source(t), False)
        result = lab.evaluator(t).evaluate(path, "submit", workloads=[first_workload(t)], seed=e.seed("interpreter"))
        pid = int(pid_file.read_text()) if pid_file.exists() else None
        pid_file.unlink(missing_ok=True)
        alive = pid is not None and pid in _alive_pids_of([pid])
        if alive:
            _kill(pid)  # the daemon this test started, by its pid
        return result, pid, alive
    return Job(f"daemon:{case_id(e, t)}", fn)


def _alive_pids_of(pids: list[int]) -> list[int]:
    out = []
    for pid in pids:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            continue
        except PermissionError:
            pass
        if not _is_zombie(pid):
            out.append(pid)
    return out


@check("daemon-dies", _daemon)
def test_no_daemon_outlives_the_evaluation(lab, case):
    result, pid, alive = lab.result(case.job)
    assert submission_reward("speedup", result) == 0
    assert not alive, f"process {pid}, forked and setsid()ed by the solution, outlived its evaluation"


@check("policy-script")
def test_quadratic_source_is_checked_fast(case, capsys):
    """The file generates a ~700 KB source and times check_solution on it: refused at once ([source-size])."""
    t = time.monotonic()
    runpy.run_path(str(case.exploit.path), run_name="__main__")
    assert time.monotonic() - t < 5
    out = capsys.readouterr().out
    assert "source-size" in out, out


@check("disarmed")
def test_fork_bomb_is_disarmed_and_never_run(case):
    """Only ever checked statically (test_static_policy_verdict), and disarmed in the file."""
    assert "ARMED = False" in case.exploit.source(case.task)
    assert case.exploit.backends == ()


def _gpu_forge(e: Exploit, t: str) -> Job:
    return run_job(e, t, "cuda", False, mode="submit")


@check("gpu-forged-speedup", _gpu_forge, gpu=True)
def test_gpu_forged_speedup_is_not_paid(lab, case):
    """Forging timings needs the harness's result channel, reached through a frame walk the policy
    refuses; a solution that gets no further cannot be paid forged speedups."""
    result = lab.result(case.job).result
    assert max(result.speedups, default=0) < 50, result.speedups
    assert submission_reward("speedup", result) < 50


def _gpu_memcheck(e: Exploit, t: str) -> Job:
    def fn(lab: Lab):
        from d2k_env.evaluator.memcheck import find_memcheck
        if find_memcheck() is None:
            return None
        ev = Evaluator(load_task(t), "cuda", time_budget_s=0.5)
        try:
            return ev.evaluate(e.path, "submit", seed=1)
        finally:
            ev.close()
    return Job(f"memcheck:{case_id(e, t)}", fn)


@check("gpu-memcheck", _gpu_memcheck, gpu=True)
def test_gpu_memcheck_sees_the_heldout_shapes_go_out_of_bounds(lab, case):
    """Right on every published shape, out of bounds on the held-out ones (seed 1 draws 3113x16256 and
    3x14592: 23 and 22 groups past a multiple of the 64-group tile)."""
    result = lab.result(case.job)
    if result is None:
        pytest.skip("no compute-sanitizer on this machine")
    text = format_result(result)
    # The tool is here, so it must attach inside the sandbox (it did not while the launcher held the
    # Landlock domain: the worker's CUDA driver could not name its threads, and this was paid 12.8x).
    assert not result.sandbox.get("memcheck", "").startswith("absent"), result.sandbox
    assert not result.correct and "[out-of-bounds] compute-sanitizer memcheck" in text, text
    assert all(w.correct for w in result.workloads if not w.heldout), text


# -- the env layer: attacks through the tools that need no exploit file ----------------------------------

@pytest.fixture
def env():
    e = gym.make(d2k_env.env_id(task_ids()[0]), backend="interpreter")
    e.reset(seed=0)
    yield e
    e.close()


@pytest.mark.parametrize("task_id", task_ids())
def test_env_workspace_tampering_is_harmless(task_id):
    """torch.py / triton.py / d2k_env/ dropped beside solution.py shadow nothing, baseline.py is
    read-only to write_file and str_replace, and the reference still earns the full reward."""
    task = load_task(task_id)
    steps = _episode(task_id, [
        call("write_file", path="torch.py", content="raise SystemExit('the workspace shadowed torch')\n"),
        call("write_file", path="triton.py", content="raise SystemExit('the workspace shadowed triton')\n"),
        call("write_file", path="d2k_env/__init__.py", content="raise SystemExit('shadowed d2k_env')\n"),
        call("write_file", path="baseline.py", content="def forward(*inputs):\n    return inputs\n"),
        call("str_replace", path="baseline.py", old="import torch", new="import os"),
        call("write_file", path="solution.py", content=task.reference_path.read_text()),
        call("read_file", path="baseline.py"),
        call("submit"),
    ])
    assert "read-only" in steps[3][0] and "read-only" in steps[4][0]
    assert "return inputs" not in steps[6][0] and task.baseline_path.read_text().splitlines()[-1] in steps[6][0]
    obs, reward, info = steps[-1]
    assert reward == 1.0 and "PASSED" in obs, obs
    assert "shadowed" not in obs


def test_env_file_tools_stay_in_the_workspace(env):
    ws = env.unwrapped.workspace.root
    baseline = (ws / "baseline.py").read_text()
    outside = ws.parent / "escape.py"
    for path in ("../escape.py", str(outside), "/tmp/d2k_holdout_abs.py", "baseline.py", "./baseline.py",
                 "sub/../baseline.py", "sub/../../escape.py", "baseline.py/.", "BASELINE.py/../baseline.py"):
        obs, reward, *_ = env.step(call("write_file", path=path, content="def forward(*a):\n    return a\n"))
        assert obs.startswith("ERROR"), (path, obs)
        assert reward == 0
    obs, *_ = env.step(call("str_replace", path="baseline.py", old="import torch", new="import os"))
    assert obs.startswith("ERROR")
    for path in ("../../../../etc/passwd", "/etc/passwd", "../triton-cache"):
        obs, *_ = env.step(call("read_file", path=path))
        assert obs.startswith("ERROR"), (path, obs)
    assert (ws / "baseline.py").read_text() == baseline
    assert not outside.exists() and not Path("/tmp/d2k_holdout_abs.py").exists()


def test_env_workspace_modules_shadow_nothing(env):
    """Modules planted beside solution.py (torch, triton, site hooks) are never imported by the worker."""
    bomb = "raise SystemExit('shadowed: the workspace was on sys.path')\n"
    for path in ("torch.py", "triton/__init__.py", "triton/language.py", "sitecustomize.py", "usercustomize.py",
                 "d2k_env/__init__.py", "numpy.py"):
        obs, *_ = env.step(call("write_file", path=path, content=bomb))
        assert obs.startswith("Wrote"), obs
    reference = load_task(env.unwrapped.task.id).reference_path.read_text()
    env.step(call("write_file", path="solution.py", content=reference))
    obs, reward, terminated, *_ = env.step(call("submit"))
    assert terminated and reward == 1.0, obs


def test_the_honest_corpus_is_large_and_spread_over_its_tasks():
    corpus = [e for e in EXPLOITS if e.klass == "honest_corpus"]
    per_task = {t: sum(e.fields["Task"] == t for e in corpus) for t in {e.fields["Task"] for e in corpus}}
    # Spread: the first three tasks hold ten idioms or more each; a catalogue task added later starts
    # with its one port in the style of its public source.
    assert len(corpus) >= 40 and sum(n >= 10 for n in per_task.values()) >= 3, per_task
    assert 3 <= sum(e.klass == "honest_refused" for e in EXPLOITS) <= 6


# -- after all of it -----------------------------------------------------------------------------------

_TREE = {p: hashlib.sha256(p.read_bytes()).hexdigest()
         for sub in ("baselines", "references", "tasks") for p in sorted((project_root() / sub).rglob("*.py"))}


@pytest.mark.parametrize("task_id", task_ids())
def test_reference_still_passes_after_the_exploits(lab, task_id):
    """Run after every case above (the pool has run them): each task's reference still passes every
    smoke workload and the held-out shapes on the Evaluator the exploits ran on."""
    ev = lab.evaluator(task_id)
    result = ev.evaluate(ev.task.reference_path, "submit", seed=1)
    assert result.correct and submission_reward("speedup", result) == 1.0, format_result(result)


@pytest.mark.gpu
@pytest.mark.parametrize("task_id", task_ids())
def test_gpu_reference_still_passes_after_the_exploits(lab, task_id):
    ev = lab.evaluator(task_id, "cuda")
    result = ev.evaluate(ev.task.reference_path, "submit", seed=1)
    assert result.correct and submission_reward("speedup", result) > 1, format_result(result)


def test_the_project_task_tree_is_untouched():
    """Whatever the exploits did, the project's own baselines, references and specs are as they were
    when this module was imported (the exploits ran on copies)."""
    now = {p: hashlib.sha256(p.read_bytes()).hexdigest() for p in _TREE}
    assert now == _TREE, [str(p) for p in _TREE if now[p] != _TREE[p]]
