"""Warm workers: an Evaluator(spares=True) hands each evaluation to a worker started before it, which
must give the verdict a fresh one gives, see nothing of the evaluation before it is dispatched, and
never outlive the evaluator; a spare that died idle is no verdict on the solution."""

import gc
import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

import d2k_env.evaluator as ev_module
from conftest import evaluated_on_a_thread_that_ended, process_gone, wait_until
from d2k_env.evaluator import Evaluator, PhaseLimits
from d2k_env.evaluator import reaper
from d2k_env.evaluator.confine import landlock_abi
from d2k_env.evaluator.sandbox import Worker
from d2k_env.task import load_task
from wrong_edits import wrong_solution

pytestmark = pytest.mark.skipif(landlock_abi() < 6, reason="spares are kept only where Landlock scopes signals")
RMSNORM = "fused_add_rmsnorm"


@pytest.fixture(scope="module")
def warm():
    ev = Evaluator(load_task(RMSNORM), "interpreter", limits=PhaseLimits(default=120), spares=True)
    yield ev
    ev.close()


def _tree(worker: Worker) -> list[int]:
    """The spare's supervisor and everything below it, once it has forked its worker."""
    assert wait_until(lambda: reaper.descendants(worker._proc.pid)), "the supervisor never started its worker"
    return [worker._proc.pid, *reaper.descendants(worker._proc.pid)]


def _verdict(result) -> tuple:
    return result.error, [(w.name, w.correct, w.message) for w in result.workloads]


def test_a_warm_evaluation_gives_the_verdict_a_cold_one_gives(warm, tmp_path):
    task = warm.task
    cold = Evaluator(task, "interpreter", limits=PhaseLimits(default=120))
    try:
        for path in (task.reference_path, wrong_solution("fused_add_rmsnorm_no_weight", tmp_path)):
            first = warm.evaluate(path, seed=7)  # the first may run cold; the next is dispatched to spares
            assert set(warm.pool.idle()) == {"solution", "replay", "check"} and all(s.alive() for s in warm.pool.idle().values())
            spares = dict(warm.pool.idle())
            hot = warm.evaluate(path, seed=7)
            assert all(warm.pool.idle()[role] is not spares[role] for role in spares), "a spare served twice"
            fresh = cold.evaluate(path, seed=7)
            assert _verdict(hot) == _verdict(fresh) == _verdict(first), (hot, fresh)
            assert hot.correct == (path == task.reference_path)
            assert hot.sandbox == fresh.sandbox, (hot.sandbox, fresh.sandbox)
        assert not cold.pool.idle()  # a bare evaluator keeps none
    finally:
        cold.close()


LEAK = textwrap.dedent("""
    import sys
    import triton
    import triton.language as tl

    # What the worker's own frames hold of its request (the policy, which refuses frames, is off).
    frame = sys._getframe()
    while frame is not None and "req" not in frame.f_locals:
        frame = frame.f_back
    print("NONCE=" + repr(frame.f_locals["req"].nonce))


    @triton.jit
    def _copy(src, dst, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        tl.store(dst + offs, tl.load(src + offs, mask=offs < n), mask=offs < n)


    def forward(x, residual, weight):
        return x, residual
""")


def test_a_spare_sees_nothing_of_the_evaluation_before_its_dispatch(warm, tmp_path, monkeypatch):
    """Idle, a spare's task and outputs directories are empty (the snapshot comes at dispatch) and
    nothing in its process names the task; once dispatched, its request has no nonce."""
    warm.evaluate(warm.task.reference_path)
    spare = warm.pool.idle()["solution"]
    assert spare.alive() and not os.listdir(spare.task_dir) and not os.listdir(spare.outputs_dir)
    for pid in _tree(spare):
        for name in ("cmdline", "environ"):
            assert RMSNORM.encode() not in Path(f"/proc/{pid}/{name}").read_bytes()
    monkeypatch.setattr(ev_module, "check_solution", lambda source, allowed: [])
    (tmp_path / "solution.py").write_text(LEAK)
    result = warm.evaluate(tmp_path / "solution.py")
    assert "NONCE=''" in result.output, result.output
    assert not result.correct


def _kill_worker(spare: Worker) -> None:
    """SIGKILL the worker under an idle spare's supervisor, and wait for the supervisor to notice."""
    os.kill(_tree(spare)[1], signal.SIGKILL)
    assert wait_until(lambda: not spare.alive()), "the supervisor outlived its idle worker"


def test_a_spare_killed_while_idle_is_replaced_and_blames_nothing(warm, monkeypatch):
    warm.evaluate(warm.task.reference_path)
    dead = warm.pool.idle()["solution"]
    _kill_worker(dead)
    result = warm.evaluate(warm.task.reference_path)
    assert result.correct, result.error
    assert warm.pool.idle()["solution"] is not dead and warm.pool.idle()["solution"].alive()
    assert not dead.directory.exists()
    # Dead between the check and the dispatch (here: a check that cannot tell): the spare's channel
    # stays silent, and the request runs again on a fresh worker.
    for role in ("solution", "replay", "check"):
        _kill_worker(warm.pool.idle()[role])
    monkeypatch.setattr(Worker, "alive", lambda self: not self._ran)
    result = warm.evaluate(warm.task.reference_path)
    assert result.correct, (result.error, result.output)


def test_execd_spares_die_with_the_thread_that_started_them_and_are_then_replaced():
    """Forked spares die with the process's fork server instead (see test_forkserver)."""
    from d2k_env.evaluator.pool import WorkerPool
    ev = Evaluator(load_task(RMSNORM), "interpreter", limits=PhaseLimits(default=120),
                   pool=WorkerPool(interpret=True, spares=True, fork=False))
    try:
        first = evaluated_on_a_thread_that_ended(ev)
        assert first.correct, first.error
        spares = dict(ev.pool.idle())
        assert wait_until(lambda: not any(s.alive() for s in spares.values())), "a spare outlived its thread"
        result = ev.evaluate(ev.task.reference_path)
        assert result.correct, result.error
        assert all(s.alive() for s in ev.pool.idle().values()) and not set(ev.pool.idle().values()) & set(spares.values())
    finally:
        ev.close()
        ev.pool.close()


@pytest.mark.parametrize("how", ["close", "collected"])
def test_no_process_or_directory_of_a_spare_outlives_its_evaluator(how):
    ev = Evaluator(load_task(RMSNORM), "interpreter", limits=PhaseLimits(default=120), spares=True)
    ev.evaluate(ev.task.reference_path)
    spares = list(ev.pool.idle().values())
    pids = [pid for spare in spares for pid in _tree(spare)]
    directories = [spare.directory for spare in spares]
    assert len(pids) >= 4 and all(d.is_dir() for d in directories)
    if how == "close":
        ev.close()
    else:
        del ev
        gc.collect()
    assert all(map(process_gone, pids)), [p for p in pids if not process_gone(p)]
    assert not any(d.exists() for d in directories)


SPARES_THEN_WAIT = textwrap.dedent("""
    import json, sys, time
    from d2k_env.evaluator import Evaluator, PhaseLimits, reaper
    from d2k_env.task import load_task

    ev = Evaluator(load_task("fused_add_rmsnorm"), "interpreter", limits=PhaseLimits(default=120), spares=True)
    assert ev.evaluate(ev.task.reference_path).correct
    while not all(reaper.descendants(s._proc.pid) for s in ev.pool.idle().values()):
        time.sleep(0.05)
    print(json.dumps([pid for s in ev.pool.idle().values() for pid in [s._proc.pid, *reaper.descendants(s._proc.pid)]]),
          flush=True)
    print(json.dumps([str(s.directory) for s in ev.pool.idle().values()]), flush=True)
    time.sleep(600)
""")


def test_no_process_of_a_spare_outlives_a_killed_env_process():
    """SIGKILLed, the env cannot clean up: each spare's supervisor learns it from the kernel, takes
    its worker down and removes the worker's directory."""
    env = {**os.environ, "PYTHONPATH": str(Path(ev_module.__file__).resolve().parents[2])}
    proc = subprocess.Popen([sys.executable, "-c", SPARES_THEN_WAIT], stdout=subprocess.PIPE, text=True, env=env)
    directories = []
    try:
        pids = json.loads(proc.stdout.readline())
        directories = json.loads(proc.stdout.readline())
    finally:
        proc.kill()
        proc.wait()
    try:
        assert len(pids) >= 6  # a supervisor and its worker per role: solution, replay, check
        assert wait_until(lambda: all(map(process_gone, pids))), [p for p in pids if not process_gone(p)]
        assert len(directories) == 3 and not any(map(os.path.exists, directories))
    finally:
        for directory in directories:
            shutil.rmtree(directory, ignore_errors=True)


def test_spares_say_when_they_are_warm_and_the_mark_never_reaches_the_output():
    """A timed run waits for this (nothing starts up beside it); the line is the harness's own."""
    ev = Evaluator(load_task(RMSNORM), "interpreter", limits=PhaseLimits(default=120), spares=True)
    try:
        assert ev.evaluate(ev.task.reference_path, seed=1).correct
        ev.pool.wait_warm(300)
        assert all(spare.wait_warm(0) for spare in ev.pool.idle().values())
        result = ev.evaluate(ev.task.reference_path, seed=2)
        assert result.correct and "d2k-worker-warm" not in result.output
    finally:
        ev.close()


def test_execd_spares_die_with_their_thread_under_nohup():
    """Run under ``nohup`` (SIGHUP ignored, which every child inherits), the parent-death signal
    SIGHUP would be discarded and an orphaned spare would live on: the supervisor restores SIGHUP's
    default action before it starts. (The fork server's case: test_forkserver.)"""
    from d2k_env.evaluator.pool import WorkerPool
    pools = []  # kept: the pools' own clean-up must not be what ends the spares

    def start_and_leave():
        pool = WorkerPool(interpret=True, fork=False)
        pool.replenish()
        pools.append(pool)

    previous = signal.signal(signal.SIGHUP, signal.SIG_IGN)
    try:
        thread = threading.Thread(target=start_and_leave)
        thread.start()
        thread.join()
    finally:
        signal.signal(signal.SIGHUP, previous)
    started = [spare for pool in pools for spare in pool.idle().values()]
    try:
        assert len(started) == 3  # a spare per role: solution, replay, check
        assert wait_until(lambda: not any(s.alive() for s in started)), "a spare outlived the thread that started it"
    finally:
        for pool in pools:
            pool.close()
    assert not any(s.directory.exists() for s in started)
