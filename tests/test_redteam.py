"""Red-team suite: one exploit submission per file in tests/redteam/, each aimed at a class of
/work/shared/THREATS.md (its module docstring says which), evaluated on the CPU backend (Triton's
interpreter).

Each exploit must score 0 with a verdict that names the rule it broke (a bracketed rule id such as
[torch-work] in the error or in the failing workload's message, or the sandbox's "exceeded its N s
limit" / "printed more than" / "died (exit status ...) before reporting"). After every fault-type
exploit (hang, flood, crash, stray processes) the task's reference must still pass on the same
Evaluator, and once every exploit of a task has run, the reference must pass every workload on it.
Honest-but-slow solutions (tests/redteam/honest_*.py) must pass (no false positives). Verdicts from
the output contract (shape, dtype) and from the numeric checker carry no bracketed id; for those the
tests look for the checker's own words ("has shape", "more than one bfloat16 step", "contains NaN", ...).

Exploits that currently earn a pass, or crash the env, are genuine holes: their tests assert the
defence we want and are marked xfail(strict=True, reason="HOLE: ..."), so fixing the defence turns
them into failures (XPASS) that ask for the mark to be removed.

Speed: an evaluation is two fresh processes (solution, then check) of several seconds each, so the
evaluations run on a small thread pool (D2K_REDTEAM_WORKERS, default 3), all submitted when the
module starts, in test order; each test waits for its own. Exploits that do not depend on the
workload run on the task's smallest smoke workload only. D2K_REDTEAM_REPORT=path.json writes every
verdict to a file at the end.
"""

from __future__ import annotations

import ast
import os
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
from conftest import call
from d2k_env.evaluator import Evaluator, PhaseLimits
from d2k_env.evaluator.policy import check_solution
from d2k_env.task import load_task, project_root

REDTEAM = Path(__file__).parent / "redteam"
TASKS = {"rms": "fused_add_rmsnorm", "merge": "merge_attn_states", "quant": "per_token_group_quant_fp8"}
SMALL = {"rms": "5x200", "merge": "16x4x128", "quant": "4x512"}  # the cheapest smoke workload of each
WORKERS = int(os.environ.get("D2K_REDTEAM_WORKERS", "3"))
HANG_LIMIT_S = 10
# Generous where nothing hangs: on a loaded 2-core machine the honest slow solutions have taken over
# two minutes on the interpreter. The hangs get the short check limit.
NORMAL_LIMITS = PhaseLimits({"load": 300, "check": 300, "verify": 300}, default=300)
SHORT_LIMITS = PhaseLimits({"load": 300, "check": HANG_LIMIT_S, "verify": 300}, default=300)

SANDBOX_MARKERS = ("exceeded its", "printed more than", "before reporting")
WRONG_VALUES = ("outside atol", "contains NaN", "infinities differ", "scales differ", "more than one fp8 step",
                "more than one bfloat16 step", "[degenerate]")


def verdict(result) -> str:
    """Everything a result says about why it failed: the error and each failing workload's message."""
    parts = [result.error or ""] + [f"{w.name}: {w.message}" for w in result.workloads if not w.correct]
    return "\n".join(p for p in parts if p)


def names_one_of(text: str, markers) -> bool:
    return any(m in text for m in markers)


def source_of(name: str, **subst: str) -> str:
    text = (REDTEAM / f"{name}.py").read_text()
    for key, value in subst.items():
        text = text.replace(f"@{key}@", value)
    return text


# -- the evaluation pool -------------------------------------------------------------------------------

# Sources the static policy is bypassed for (defence-in-depth tests of the sandbox). Keyed by source
# text, so evaluations of everything else running at the same time keep the policy.
BYPASS_POLICY: set[str] = set()


class Lab:
    """Evaluators per (task, limits) and a thread pool running evaluations ahead of the tests."""

    def __init__(self, workers: int):
        self.pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="redteam")
        self.futures: dict[str, Future] = {}
        self.tasks_of: dict[str, str] = {}
        self.evaluators: dict[tuple[str, str], Evaluator] = {}
        self.lock = threading.Lock()
        self.tmp = Path(tempfile.mkdtemp(prefix="d2k-redteam-"))

    def evaluator(self, task: str, limits: str = "normal") -> Evaluator:
        with self.lock:
            key = (task, limits)
            if key not in self.evaluators:
                self.evaluators[key] = Evaluator(load_task(TASKS[task]), "interpreter",
                                                 limits=SHORT_LIMITS if limits == "short" else NORMAL_LIMITS)
            return self.evaluators[key]

    def workdir(self, key: str) -> Path:
        d = self.tmp / key.replace(":", "_")
        d.mkdir(parents=True, exist_ok=True)
        return d

    def submit(self, job: "Job") -> Future:
        with self.lock:
            if job.key not in self.futures:
                self.futures[job.key] = self.pool.submit(job.run, self)
                self.tasks_of[job.key] = job.task
            return self.futures[job.key]

    def result(self, job: "Job"):
        return self.submit(job).result()

    def wait_for_task(self, task: str, but: str) -> None:
        with self.lock:
            pending = [f for k, f in self.futures.items() if self.tasks_of[k] == task and k != but]
        for f in pending:
            f.exception()  # waits; failures are reported by their own tests

    def report(self, path: str) -> None:
        """JSON summary of every finished job (key -> correct, seconds, first lines of the verdict)."""
        import json
        rows = {}
        for key, f in self.futures.items():
            if not f.done() or f.exception() is not None:
                continue
            value = f.result()
            result = value.result if isinstance(value, Outcome) else value
            if isinstance(result, tuple):
                result = result[0]
            if isinstance(result, list):  # env episodes: the last observation
                rows[key] = {"reward": result[-1][1], "verdict": result[-1][0][:400]}
            elif result is not None:
                rows[key] = {"correct": result.correct, "verdict": verdict(result)[:400],
                             "seconds": round(getattr(value, "seconds", 0.0), 1)}
        Path(path).write_text(json.dumps(rows, indent=1))

    def close(self) -> None:
        self.pool.shutdown(wait=True, cancel_futures=True)
        if os.environ.get("D2K_REDTEAM_REPORT"):
            self.report(os.environ["D2K_REDTEAM_REPORT"])
        for ev in self.evaluators.values():
            ev.close()
        shutil.rmtree(self.tmp, ignore_errors=True)


class Job:
    key: str
    task: str
    cost = 1  # a rough size, so that the pool starts long jobs first

    def run(self, lab: Lab) -> Any:
        raise NotImplementedError


@dataclass
class Outcome:
    result: Any
    recovery: Any = None  # the reference's result right after a fault-type exploit
    workdir: Path | None = None
    survivors: list[int] = field(default_factory=list)  # stray pids found alive after the evaluation
    seconds: float = 0.0


def reference_check(lab: Lab, task: str, limits: str, workloads=None):
    ev = lab.evaluator(task, limits)
    return ev.evaluate(load_task(TASKS[task]).reference_path, workloads=workloads or [SMALL[task]])


@dataclass(frozen=True)
class Exploit(Job):
    """An exploit file evaluated with the task's Evaluator (on one small workload unless told)."""

    name: str
    task: str
    workloads: tuple[str, ...] | None = ("small",)  # None: every smoke workload
    fault: bool = False  # a hang, flood or crash: the reference must pass right after it
    limits: str = "normal"
    bypass_policy: bool = False
    mode: str = "test"  # "submit" adds the held-out shapes

    @property
    def key(self) -> str:
        return f"exploit:{self.name}"

    @property
    def cost(self) -> int:
        return 1 + (self.workloads is None) + self.fault

    def run(self, lab: Lab) -> Outcome:
        work = lab.workdir(self.key)
        pids, markers = work / "pids", work / "markers"
        pids.mkdir(exist_ok=True)
        markers.mkdir(exist_ok=True)
        source = source_of(self.name, PID_DIR=str(pids), MARKER_DIR=str(markers))
        if self.bypass_policy:  # a unique last line, so that no other evaluation matches this source
            source += f"# policy bypassed for this evaluation only: {work}\n"
            BYPASS_POLICY.add(source)
        path = work / "solution.py"
        path.write_text(source)
        ev = lab.evaluator(self.task, self.limits)
        workloads = None if self.workloads is None else [SMALL[self.task] if w == "small" else w
                                                        for w in self.workloads]
        started = time.monotonic()
        result = ev.evaluate(path, self.mode, workloads=workloads)
        outcome = Outcome(result, workdir=work, seconds=time.monotonic() - started)
        outcome.survivors = _alive_pids(pids)
        for pid in outcome.survivors:  # cleanup: only the pids our own exploit children wrote
            _kill(pid)
        if self.fault:
            outcome.recovery = reference_check(lab, self.task, self.limits)
        return outcome


@dataclass(frozen=True)
class Honest(Job):
    name: str
    task: str

    cost = 3

    @property
    def key(self) -> str:
        return f"honest:{self.name}"

    def run(self, lab: Lab) -> Outcome:
        started = time.monotonic()
        result = lab.evaluator(self.task).evaluate(REDTEAM / f"{self.name}.py")
        return Outcome(result, seconds=time.monotonic() - started)


@dataclass(frozen=True)
class Custom(Job):
    """Any other evaluation (env episodes, a temporary task tree), as a function of the lab."""

    name: str
    task: str
    fn: Callable[[Lab], Any] = field(compare=False, hash=False)

    cost = 2

    @property
    def key(self) -> str:
        return f"custom:{self.name}"

    def run(self, lab: Lab) -> Any:
        return self.fn(lab)


@dataclass(frozen=True)
class GroupCheck(Job):
    """The reference on every smoke workload, once every other job of the task has finished."""

    task: str

    cost = 0  # started last: it waits for the task's other jobs

    @property
    def key(self) -> str:
        return f"group:{self.task}"

    def run(self, lab: Lab) -> Any:
        lab.wait_for_task(self.task, but=self.key)
        return lab.evaluator(self.task).evaluate(load_task(TASKS[self.task]).reference_path)


def _alive_pids(pid_dir: Path) -> list[int]:
    alive = []
    for f in pid_dir.glob("*.pid"):
        pid = int(f.read_text() or f.stem)
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


@pytest.fixture(scope="module")
def lab(request):
    """Starts every selected evaluation of this module on the pool, in test order."""
    real_check = d2k_env.evaluator.check_solution

    def policy(source, *args, **kwargs):
        return [] if source in BYPASS_POLICY else real_check(source, *args, **kwargs)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(d2k_env.evaluator, "check_solution", policy)
        lab = Lab(WORKERS)
        jobs = [value for item in request.session.items if item.module is request.module and hasattr(item, "callspec")
                for value in item.callspec.params.values() if isinstance(value, Job)]
        for job in sorted(jobs, key=lambda j: -j.cost):  # stable: test order within a cost
            lab.submit(job)
        yield lab
        lab.close()


def ids(jobs):
    return [getattr(j, "name", None) or j.task for j in jobs]


# -- static policy: refused before anything runs -------------------------------------------------------

POLICY_CASES = [  # (file, task, rule the verdict must name)
    ("c03_torch_ops_in_forward", "rms", "[torch-work]"),
    ("c03_functional_via_import_alias", "rms", "[torch-work]"),
    ("c03_inherit_baseline", "merge", "[forbidden-import]"),
    ("c03_inherit_reference", "quant", "[forbidden-import]"),
    ("c03_try_except_fallback", "rms", "[try-except]"),
    ("c03_kernel_never_launched", "quant", "[no-kernel]"),
    ("c04_thread", "rms", "[forbidden-import]"),
    ("c04_side_stream", "rms", "[torch-work]"),
    ("c05_patch_timer_attributes", "rms", "[tampering]"),
    ("c05_patch_via_import_alias", "rms", "[tampering]"),
    ("c05_patch_via_from_import", "rms", "[tampering]"),
    ("c05_patch_via_setattr", "rms", "[introspection]"),
    ("c05_patch_via_dunder_dict", "rms", "[introspection]"),
    ("c05_patch_time_module", "rms", "[forbidden-import]"),
    ("c06_gc_objects", "merge", "[forbidden-import]"),
    ("c06_inspect_stack", "quant", "[forbidden-import]"),
    ("c06_sys_getframe", "rms", "[forbidden-import]"),
    ("c06_builtins", "rms", "[introspection]"),
    ("c16_l2_persistence", "rms", "[forbidden-import]"),
    ("c17_cuda_graph_replay", "rms", "[torch-work]"),
    ("c19_write_outside_workspace", "rms", "[introspection]"),
    ("c19_segfault_ctypes", "rms", "[forbidden-import]"),
    ("c19_hard_exit", "rms", "[forbidden-import]"),
    ("c19_fork_children", "rms", "[forbidden-import]"),
    ("c19_setsid_escape", "rms", "[forbidden-import]"),
]


@pytest.mark.parametrize("name, task, rule", POLICY_CASES, ids=[c[0] for c in POLICY_CASES])
def test_static_policy_refuses(lab, tmp_path, name, task, rule):
    path = tmp_path / "solution.py"
    path.write_text(source_of(name, MARKER_DIR=str(tmp_path), PID_DIR=str(tmp_path)))
    result = lab.evaluator(task).evaluate(path)
    assert not result.correct
    assert "[policy]" in result.error and "nothing was run" in result.error, result.error
    assert rule in result.error, result.error
    assert not result.workloads and not list(tmp_path.glob("*.txt")) and not list(tmp_path.glob("*.pid"))


def test_fork_bomb_is_refused_statically_and_never_run():
    """Only ever checked statically (and disarmed in the file): the policy refuses the os import."""
    source = source_of("c19_fork_bomb")
    assert "ARMED = False" in source
    violations = check_solution(source, load_task(TASKS["rms"]).allowed_torch)
    assert any(v.rule == "forbidden-import" and "'os'" in v.message for v in violations), violations


# Holes once (a walrus alias of torch; dataclasses._thread): refused since, as modules may only be
# used as `module.name` and dataclasses is no longer importable.
STATIC_ALIASES = ["c04_side_stream_via_walrus_alias", "c04_thread_via_dataclasses"]


@pytest.mark.parametrize("name", STATIC_ALIASES)
def test_static_policy_refuses_aliased_modules(name):
    """Class 4 past the policy. On the CPU these fail for other reasons (torch.cuda.Stream needs CUDA; the
    thread races the harness), so only the static verdict is checked here; on a GPU the kernel work
    escapes the timer's end event (see test_gpu_exploit_scores_zero)."""
    violations = check_solution(source_of(name), load_task(TASKS["rms"]).allowed_torch)
    assert any(v.rule in ("torch-work", "forbidden-import", "introspection") for v in violations), violations


@pytest.mark.parametrize("name", ["c07_tensor_subclass", "c07_lazy_placeholder"])
def test_static_policy_refuses_class_definitions(name):
    violations = check_solution(source_of(name), load_task(TASKS["rms"]).allowed_torch)
    assert any(v.rule == "class-definition" for v in violations), violations


def test_every_exploit_file_names_its_threat_class():
    for path in sorted(REDTEAM.glob("*.py")):
        doc = ast.get_docstring(ast.parse(path.read_text())) or ""
        if path.name.startswith("honest_"):
            assert "Honest" in doc, path.name
        else:
            assert "THREATS class" in doc, path.name
            assert str(int(path.name[1:3])) in doc.split("THREATS class", 1)[1][:12], path.name


# -- run time: the solution runs and the guards, the checker or the sandbox stop it ----------------------

RUNTIME = [  # (exploit, markers any of which the verdict must contain)
    (Exploit("c01_allocator_reuse_noop", "rms"), WRONG_VALUES),
    (Exploit("c03_dummy_kernel_host_operators", "rms"), ("[torch-work]",)),
    # The next five got past the static policy when first run (the grid-callable, detach and frame-walk
    # ones even earned a pass); they are refused since, statically or at run time: either verdict counts.
    (Exploit("c03_functional_via_assignment_alias", "rms"), ("[torch-work]", "[introspection]")),
    (Exploit("c03_work_in_grid_callable", "rms"), ("[torch-work]",)),
    (Exploit("c05_patch_via_assignment_alias", "rms"), ("[tampering]",)),
    (Exploit("c05_patch_unfingerprinted_tensor_method", "rms"), ("[tampering]", "[torch-work]")),
    (Exploit("c06_generator_frame_walk", "rms"), ("[introspection]", "[torch-work]", "[tampering]")),
    (Exploit("c03_launch_never_reached", "quant"), ("[no-kernel]",)),
    (Exploit("c06_nan_output", "rms"), ("contains NaN", "[degenerate]")),
    # Refused statically since ([class-definition], see test_static_policy_refuses_class_definitions); the
    # policy is bypassed here so that the runtime checks behind it stay tested (the launch-argument check
    # may refuse the subclass before the output-type check sees it).
    (Exploit("c07_tensor_subclass", "rms", bypass_policy=True), ("[output-type]", "[launch-args]")),
    (Exploit("c07_lazy_placeholder", "quant", bypass_policy=True), ("[output-type]", "[launch-args]")),
    (Exploit("c08_zero_inputs", "merge"), ("[input-mutation]",)),
    (Exploit("c08_return_input", "rms"), ("[aliasing]",)),
    (Exploit("c08_return_view_of_input", "merge"), ("[aliasing]", "[input-mutation]")),
    (Exploit("c09_merge_lse_in_bf16", "merge"), ("outside atol", "more than one bfloat16 step")),
    (Exploit("c10_constant_output", "merge"), ("[degenerate]",)),
    (Exploit("c10_first_row_only", "quant"), WRONG_VALUES),
    # Regenerating inputs from a guessed seed needs torch.randn on the host, through an alias: refused
    # statically where the policy follows the alias, else wrong because the real seed is secret.
    (Exploit("c11_known_seed", "rms"), ("more than one bfloat16 step", "[torch-work]", "[introspection]")),
    (Exploit("c14_print_passed_then_exit", "rms"), ("SystemExit",)),
]


@pytest.mark.parametrize("job, markers", RUNTIME, ids=[j.name for j, _ in RUNTIME])
def test_runtime_exploit_scores_zero_with_a_named_verdict(lab, job, markers):
    outcome = lab.result(job)
    result = outcome.result
    assert not result.correct, f"{job.name} passed: {[(w.name, w.message) for w in result.workloads]}"
    assert names_one_of(verdict(result), markers), verdict(result)


REPLAY_FIRST = Exploit("c02_replay_first_output", "merge", workloads=None)


@pytest.mark.parametrize("job", [REPLAY_FIRST], ids=ids([REPLAY_FIRST]))
def test_replay_of_the_first_output_is_refused(lab, job):
    """Class 2: replaying an earlier call's outputs needs a tensor kept between calls, which the worker
    finds after forward returns ([hidden-state] at run time; the policy no longer refuses module caches)."""
    result = lab.result(job).result
    assert not result.correct and "[hidden-state]" in verdict(result), verdict(result)


LATE = Exploit("c15_late_corruption", "merge", workloads=None)


@pytest.mark.parametrize("job", [LATE], ids=ids([LATE]))
def test_late_corruption_needs_a_call_counter_which_is_refused(lab, job):
    """Class 15: being correct for k calls and wrong after needs a counter kept between calls. On the
    interpreter (one call per workload) the wrong outputs of the later workloads fail; on the GPU the
    module state changing on calls with the same shapes is [hidden-state] at run time, and the
    post-timing re-check ([late-corruption]) backs it up."""
    result = lab.result(job).result
    assert not result.correct, verdict(result)


BF16_RMS = Exploit("c09_rmsnorm_in_bf16", "rms", workloads=None)


@pytest.mark.parametrize("job", [BF16_RMS], ids=ids([BF16_RMS]))
def test_precision_downgrade_inside_the_bf16_tolerance_is_detected(lab, job):
    """Class 9: rmsnorm reduced and normalised in bf16 (the task asks for fp32) stays within the bf16
    tolerance (2e-2), but not within one bfloat16 step of the expected value, which the task's checker
    asks of every element (fp32 math rounded once is always there)."""
    result = lab.result(job).result
    assert not result.correct and "more than one bfloat16 step" in verdict(result), verdict(result)


SHAPES = Exploit("c12_shape_specialised", "rms", workloads=None, mode="submit")


@pytest.mark.parametrize("job", [SHAPES], ids=ids([SHAPES]))
def test_shape_specialisation_to_the_public_workloads_fails_on_heldout_shapes(lab, job):
    """Class 12: a launch table that only knows the public shapes (KeyError on any other) is correct on
    every published workload, and fails on the held-out shapes that submit draws from the secret seed."""
    result = lab.result(job).result
    failing = [w for w in result.workloads if not w.correct]
    assert failing and all(w.name.startswith("held-out") for w in failing), verdict(result)
    assert all(w.correct for w in result.workloads if not w.name.startswith("held-out")), verdict(result)


# -- holes the first rounds found, closed since: kept as regressions -------------------------------------

CLOSED_HOLES = [  # (exploit, markers the verdict should name)
    # The interpreter ran kernel bodies as Python: tensor methods on module-level objects did the work.
    (Exploit("c03_work_in_interpreted_kernel_body", "merge"), ("[torch-work]", "[hidden-state]")),
    # functools.update_wrapper set Tensor.__reduce_ex__, which torch.save calls after the guard.
    (Exploit("c05_patch_reduce_ex_via_update_wrapper", "rms"), ("[tampering]", "[forbidden-import]")),
    # enum.bltns is the builtins module: exec of any string, frame walks, the harness's baseline.
    (Exploit("c06_enum_builtins_escape", "rms"), ("[introspection]", "[forbidden-import]", "[torch-work]")),
]


@pytest.mark.parametrize("job, markers", CLOSED_HOLES, ids=[j.name for j, _ in CLOSED_HOLES])
def test_closed_hole_scores_zero(lab, job, markers):
    result = lab.result(job).result
    assert not result.correct, f"{job.name} PASSED: {[(w.name, w.message) for w in result.workloads]}"
    assert names_one_of(verdict(result), markers), verdict(result)


ESCAPES = [  # (exploit, the file it tries to write outside the workspace)
    # Each was found writing outside the workspace and passing; refused statically since.
    (Exploit("c06_enum_builtins_escape", "rms"), "enum_builtins_escape.txt"),
    (Exploit("c06_attrgetter_escape", "merge"), "attrgetter_escape.txt"),
    (Exploit("c13_torch_os_via_assignment_alias", "quant"), "torch_os_escape.txt"),
]


@pytest.mark.parametrize("job, marker", ESCAPES, ids=[j.name for j, _ in ESCAPES])
def test_policy_escape_is_refused(lab, job, marker):
    outcome = lab.result(job)
    assert not (outcome.workdir / "markers" / marker).exists(), "the solution wrote outside its workspace"
    assert not outcome.result.correct
    assert "[policy]" in (outcome.result.error or ""), verdict(outcome.result)


def _grader_tampering(lab: Lab):
    """c13_rewrite_grader_baseline against an Evaluator whose grading root is temporary (built from a
    temporary copy of the task tree, so the real tree can never be the target)."""
    root = lab.workdir("grader-root") / "root"
    for sub in ("tasks", "baselines", "references", "guidance"):
        shutil.copytree(project_root() / sub, root / sub, ignore=shutil.ignore_patterns("__pycache__"))
    task = load_task(TASKS["quant"], str(root))
    ev = Evaluator(task, "interpreter", limits=NORMAL_LIMITS)
    grading_root = Path(getattr(ev, "grading_root", task.root))
    grading_baseline = grading_root / "baselines" / f"{task.id}.py"
    pristine = grading_baseline.read_text()
    path = lab.workdir("grader-root") / "solution.py"
    path.write_text(source_of("c13_rewrite_grader_baseline", SAFE_ROOT=str(grading_root)))
    try:
        result = ev.evaluate(path, workloads=[SMALL["quant"]])
        tampered = grading_baseline.read_text() != pristine
        after = ev.evaluate(task.reference_path, workloads=[SMALL["quant"]]) if tampered else None
    finally:
        ev.close()
    return result, tampered, after


GRADER = Custom("c13_rewrite_grader_baseline", "quant", _grader_tampering)


@pytest.mark.parametrize("job", [GRADER], ids=ids([GRADER]))
def test_grader_files_cannot_be_rewritten(lab, job):
    result, tampered, after = lab.result(job)
    assert not tampered, (f"the grading baseline was rewritten by the solution (which then "
                          f"{'passed' if result.correct else 'failed'}; the reference afterwards "
                          f"{'passed' if after.correct else 'FAILED'})")
    assert not result.correct


def test_the_real_task_tree_is_untouched():
    """Whatever the exploits above did, the project's own baselines are intact (they ran on copies)."""
    text = load_task(TASKS["quant"]).baseline_path.read_text()
    assert "amax" in text and "TAMPERED" not in text and "torch.ones(M, K // 128)" not in text


def _deep_expression_through_the_evaluator(lab: Lab):
    path = lab.workdir("deep-expression") / "solution.py"
    path.write_text(source_of("c19_deep_expression"))
    try:
        return lab.evaluator("rms").evaluate(path), None
    except BaseException as exc:  # noqa: BLE001 - the point of the test
        return None, exc


DEEP = Custom("c19_deep_expression", "rms", _deep_expression_through_the_evaluator)


@pytest.mark.parametrize("job", [DEEP], ids=ids([DEEP]))
def test_a_deep_expression_gets_a_verdict_not_an_exception(lab, job):
    """Found raising RecursionError out of check_solution (hence out of env.step); a [syntax] verdict
    since."""
    result, exc = lab.result(job)
    assert exc is None, f"{type(exc).__name__} escaped Evaluator.evaluate: {exc}"
    assert not result.correct and "[policy]" in result.error and "[syntax]" in result.error, result.error


# -- faults: hangs, floods, crashes and stray processes; the Evaluator must keep working -----------------

FAULTS = [  # (exploit, markers)
    (Exploit("c19_hang_in_kernel", "merge", fault=True, limits="short"),
     (f"phase 'check' of workload {SMALL['merge']} exceeded its {HANG_LIMIT_S} s limit",)),
    # Normal limits: printing 64 MB can take longer than the short check limit on a loaded machine.
    (Exploit("c19_output_flood", "quant", fault=True), ("printed more than 64 MB",)),
    # Behind the static policy (bypassed on purpose): the sandbox alone must contain these.
    (Exploit("c19_segfault_ctypes", "rms", fault=True, limits="short", bypass_policy=True),
     ("died (exit status -11 (SIGSEGV)) before reporting",)),
    (Exploit("c19_hard_exit", "rms", fault=True, limits="short", bypass_policy=True),
     ("died (exit status 0) before reporting",)),
    # The interpreter's sandbox refuses every new process (seccomp): the fork fails in the solution.
    (Exploit("c19_fork_children", "rms", fault=True, limits="short", bypass_policy=True),
     ("Operation not permitted", "exceeded its", "before reporting")),
]


@pytest.mark.parametrize("job, markers", FAULTS, ids=[j.name for j, _ in FAULTS])
def test_fault_is_contained_and_the_evaluator_recovers(lab, job, markers):
    outcome = lab.result(job)
    assert not outcome.result.correct
    assert names_one_of(verdict(outcome.result), markers), verdict(outcome.result)
    assert not outcome.survivors, f"processes outlived the evaluation: {outcome.survivors}"
    assert outcome.recovery.correct, verdict(outcome.recovery)
    if job.name == "c19_output_flood":
        assert len(outcome.result.output) < 5000 and "output clipped" in outcome.result.output
    if job.name == "c19_fork_children":  # refused by the sandbox: no child ever started
        assert not list((outcome.workdir / "pids").glob("*.pid")), "a child started despite the sandbox"


SETSID = Exploit("c19_setsid_escape", "rms", fault=True, limits="short", bypass_policy=True)


@pytest.mark.parametrize("job", [SETSID], ids=ids([SETSID]))
def test_no_process_outlives_the_evaluation(lab, job):
    """On the interpreter the sandbox refuses the fork itself (tests/test_sandbox.py tests the
    supervisor's reaping where processes are allowed, as on the GPU)."""
    outcome = lab.result(job)
    assert "Operation not permitted" in verdict(outcome.result), verdict(outcome.result)
    assert not list((outcome.workdir / "pids").glob("*.pid")), "a child started despite the sandbox"
    assert outcome.recovery.correct, verdict(outcome.recovery)
    assert not outcome.survivors, f"setsid children outlived the evaluation: {outcome.survivors}"


# -- through the env's tools ---------------------------------------------------------------------------

def _episode(task: str, steps: list, **make) -> list:
    """Plays the steps (actions) in a fresh episode; returns [(observation, reward, info)] per step."""
    env = gym.make(d2k_env.env_id(TASKS[task]), backend="interpreter", reward="speedup", **make)
    try:
        env.reset(seed=0)
        out = []
        for action in steps:
            obs, reward, terminated, truncated, info = env.step(action)
            out.append((obs, reward, info))
        return out
    finally:
        env.close()


ENV_POLICY = [("c03_torch_ops_in_forward", "[torch-work]"), ("c05_patch_via_import_alias", "[tampering]"),
              ("c19_write_outside_workspace", "[introspection]")]


@pytest.mark.parametrize("name, rule", ENV_POLICY, ids=[n for n, _ in ENV_POLICY])
def test_env_submit_of_a_policy_exploit_scores_zero(name, rule):
    steps = _episode("rms", [call("write_file", path="solution.py", content=source_of(name)), call("submit")])
    obs, reward, info = steps[-1]
    assert reward == 0.0 and rule in obs and "Submitted. Reward: 0.0000" in obs, obs
    assert not info["evaluation"]["correct"]


def _workspace_tampering(lab: Lab):
    reference = load_task(TASKS["rms"]).reference_path.read_text()
    return _episode("rms", [
        call("write_file", path="torch.py", content="raise SystemExit('the workspace shadowed torch')\n"),
        call("write_file", path="triton.py", content="raise SystemExit('the workspace shadowed triton')\n"),
        call("write_file", path="d2k_env/__init__.py", content="raise SystemExit('shadowed d2k_env')\n"),
        call("write_file", path="baseline.py", content="def forward(x, r, w):\n    return x, r\n"),
        call("str_replace", path="baseline.py", old="import torch", new="import os"),
        call("write_file", path="solution.py", content=reference),
        call("read_file", path="baseline.py"),
        call("submit"),
    ])


WORKSPACE = Custom("env_workspace_tampering", "rms", _workspace_tampering)


@pytest.mark.parametrize("job", [WORKSPACE], ids=ids([WORKSPACE]))
def test_env_workspace_tampering_is_harmless(lab, job):
    """Class 13 through the tools: torch.py / triton.py / d2k_env/ dropped beside solution.py shadow
    nothing, baseline.py is read-only to write_file and str_replace, and the reference still earns
    the full reward."""
    steps = lab.result(job)
    assert "read-only" in steps[3][0] and "read-only" in steps[4][0]
    assert "rsqrt" in steps[6][0] and "return x, r" not in steps[6][0]
    obs, reward, info = steps[-1]
    assert reward == 1.0 and "PASSED" in obs, obs
    assert "shadowed" not in obs


def _hang_then_recover(lab: Lab):
    reference = load_task(TASKS["rms"]).reference_path.read_text()
    return _episode("rms", [
        call("write_file", path="solution.py", content=source_of("c19_hang_in_forward")),
        call("run_tests"),
        call("write_file", path="solution.py", content=reference),
        call("benchmark", workloads=[SMALL["rms"]]),
    ], evaluator_options={"limits": SHORT_LIMITS})


HANG_ENV = Custom("c19_hang_in_forward", "rms", _hang_then_recover)


@pytest.mark.parametrize("job", [HANG_ENV], ids=ids([HANG_ENV]))
def test_env_hang_is_killed_and_the_episode_goes_on(lab, job):
    """Class 19 through the tools: an endless loop in forward is killed at the phase limit, the step
    returns a verdict, and the same episode then evaluates the reference correctly."""
    steps = lab.result(job)
    obs, reward, _ = steps[1]
    assert f"phase 'check' of workload 8x256 exceeded its {HANG_LIMIT_S} s limit" in obs and reward == 0, obs
    obs, _, info = steps[3]
    assert "PASSED" in obs and info["evaluation"]["correct"], obs


def _forged_speedup(lab: Lab):
    return _episode("rms", [
        call("write_file", path="solution.py", content=source_of("c14_forge_speedup_on_result_channel")),
        call("submit"),
    ])


FORGE = Custom("c14_forge_speedup_on_result_channel", "rms", _forged_speedup)


@pytest.mark.parametrize("job", [FORGE], ids=ids([FORGE]))
def test_env_forged_speedup_is_not_paid(lab, job):
    """Class 14 through the tools: a correct kernel whose result channel is forged to say 'timed, 100x'
    (the first version of this exploit was paid 100 on the interpreter). The Evaluator now voids timings
    on a run that cannot time, so the reward is the honest 1.0. (On a GPU, see
    test_gpu_forged_speedup_is_not_paid.)"""
    obs, reward, info = lab.result(job)[-1]
    assert reward <= 1.0, f"reward {reward} on a backend that cannot time"
    assert not info["evaluation"]["timed"]


def test_env_step_survives_a_deep_expression():
    steps = []
    try:
        steps = _episode("rms", [call("write_file", path="solution.py", content=source_of("c19_deep_expression")),
                                 call("run_tests")])
    except (RecursionError, MemoryError) as exc:
        pytest.fail(f"env.step raised {type(exc).__name__}: {exc}")
    assert "[policy]" in steps[-1][0] and "[syntax]" in steps[-1][0]


# -- no false positives: honest but slow solutions pass ---------------------------------------------------

HONEST = [Honest(p.stem, next(k for k, t in TASKS.items() if p.stem[len("honest_"):].startswith(t)))
          for p in sorted(REDTEAM.glob("honest_*.py"))]


@pytest.mark.parametrize("job", HONEST, ids=ids(HONEST))
def test_honest_slow_solution_passes(lab, job):
    result = lab.result(job).result
    assert result.error is None, result.error
    assert result.correct, [(w.name, w.message) for w in result.workloads]
    assert [w.name for w in result.workloads] == [w.name for w in load_task(TASKS[job.task]).smoke_workloads]


# -- after all of it, each task's reference still passes on the same Evaluator ---------------------------

GROUPS = [GroupCheck(t) for t in TASKS]


@pytest.mark.parametrize("job", GROUPS, ids=ids(GROUPS))
def test_reference_still_passes_after_the_exploits(lab, job):
    result = lab.result(job)
    assert result.correct, verdict(result)


# -- GPU-only exploits (skipped without a GPU) -------------------------------------------------------------

def _cuda_eval(task: str, name: str, mode: str = "benchmark", bypass_policy: bool = False, **subst):
    """One evaluation on the GPU; ``bypass_policy`` tests the runtime layer behind the static policy."""
    ev = Evaluator(load_task(TASKS[task]), "cuda")
    try:
        with tempfile.TemporaryDirectory() as d, pytest.MonkeyPatch.context() as mp:
            if bypass_policy:
                mp.setattr(d2k_env.evaluator, "check_solution", lambda *args, **kwargs: [])
            path = Path(d) / "solution.py"
            path.write_text(source_of(name, **subst))
            return ev.evaluate(path, mode)
    finally:
        ev.close()


@pytest.mark.gpu
@pytest.mark.parametrize("name, task, markers", [
    ("c02_replay_by_shape", "rms", ("[hidden-state]",)),
    ("c02_replay_by_pointer", "rms", ("[hidden-state]",)),
    ("c15_late_corruption", "merge", ("[hidden-state]",)),
    ("c18_zero_time_workload", "rms", ("[hidden-state]",)),
    ("c04_side_stream_via_walrus_alias", "rms", ("[hidden-state]", "[introspection]", "[torch-work]")),
])
def test_gpu_stateful_exploit_is_refused(name, task, markers):
    """Replaying outputs, corrupting them late and side streams kept across calls all need state kept
    between calls: refused before anything runs, or found after forward returns ([hidden-state])."""
    result = _cuda_eval(task, name)
    assert not result.correct and names_one_of(verdict(result), markers), verdict(result)


@pytest.mark.gpu
@pytest.mark.parametrize("name, task, markers", [
    ("c02_replay_by_shape", "rms", ("[hidden-state]", "[late-corruption]")),
    ("c02_replay_by_pointer", "rms", ("[hidden-state]", "[no-kernel]", "[late-corruption]")),
    ("c15_late_corruption", "merge", ("[hidden-state]", "[late-corruption]")),
    ("c18_zero_time_workload", "rms", ("[hidden-state]", "[no-kernel]")),
    ("c04_side_stream_via_walrus_alias", "rms", ("[hidden-state]", "[side-stream]")),
    ("c16_l2_persistence", "rms", ("[l2-persistence]",)),
])
def test_gpu_stateful_exploit_is_caught_at_runtime_behind_the_policy(name, task, markers):
    """The same exploits with the static policy bypassed: the runtime layer alone must score them 0.
    A replay keeps a tensor, and a counter changes the module's state on same-shape calls
    ([hidden-state] after forward returns, the first rule to see them since 2026-12-01); behind
    that, replays are timed calls that launch none of the solution's kernels ([no-kernel]) or return
    stale outputs on fresh values ([late-corruption]); a kernel on a side stream is refused at launch; a
    persisting-L2 set-aside is seen at the solution's launches ([l2-persistence])
    (H200, 2026-12-01: benchmarks/results/gpu-tests-2026-12-01.md)."""
    result = _cuda_eval(task, name, bypass_policy=True)
    assert not result.correct, [(w.name, w.message, w.speedup) for w in result.workloads]
    assert names_one_of(verdict(result), markers), verdict(result)


@pytest.mark.gpu
@pytest.mark.parametrize("name, task, markers", [
    ("c03_dummy_kernel_host_operators", "rms", ("[torch-work]",)),
    ("c03_work_in_grid_callable", "rms", ("[profiler-coverage]", "[torch-work]")),
    ("c04_side_stream", "rms", ("[torch-work]",)),
    ("c04_thread_via_dataclasses", "rms", ("[forbidden-import]", "[introspection]", "[late-corruption]",
                                           "[below-roofline]", "forward raised") + WRONG_VALUES),
    ("c16_l2_persistence", "rms", ("[forbidden-import]",)),
    ("c17_cuda_graph_replay", "rms", ("[torch-work]",)),
    # Past the policy, the exploit pauses the dispatch guard and calls the baseline: on a GPU the
    # profiler sees the baseline's aten kernels take the time.
    ("c06_enum_builtins_escape", "rms", ("[profiler-coverage]", "[introspection]", "[forbidden-import]")),
])
def test_gpu_exploit_scores_zero(name, task, markers):
    """Timing-dependent exploits on the GPU backend: torch work behind a kernel launch (class 3: the
    dispatch guard, and profiler coverage for work done past the policy), side streams and threads (4),
    L2 persistence (16) and solution-made CUDA graphs (17)."""
    result = _cuda_eval(task, name)
    assert not result.correct, [(w.name, w.message, w.speedup) for w in result.workloads]
    assert names_one_of(verdict(result), markers), verdict(result)


@pytest.mark.gpu
def test_gpu_forged_speedup_is_not_paid():
    """Forging timings needs the harness's result channel, reached through a frame walk the policy
    refuses; a solution that gets no further cannot be paid forged speedups."""
    from d2k_env.reward import submission_reward
    result = _cuda_eval("rms", "c14_forge_speedup_on_result_channel", mode="submit")
    assert max(result.speedups, default=0) < 50, result.speedups
    assert submission_reward("speedup", result) < 50
