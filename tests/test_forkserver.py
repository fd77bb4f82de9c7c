"""The fork server: a worker forked from it must be the worker exec would have started (same verdict,
same layers, no descriptor more); one server serves every pool of its process, never outlives the
process nor dies with a thread that merely ended, and is replaced when it dies."""

import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import d2k_env.evaluator as ev_module
from conftest import evaluated_on_a_thread_that_ended, process_gone, wait_until
from d2k_env.evaluator import Evaluator, PhaseLimits
from d2k_env.evaluator import forkserver, reaper
from d2k_env import tempdirs
from d2k_env.evaluator.pool import WorkerPool
from d2k_env.task import load_task
from wrong_edits import wrong_solution

RMSNORM = "fused_add_rmsnorm"

# What the worker holds open when the solution loads, as kinds (pipe, socket, a path), and the
# landlock-visible files it can open; printed from the module's import (the policy is off).
DESCRIPTORS = textwrap.dedent("""
    import os
    kinds = []
    for fd in sorted(os.listdir("/proc/self/fd"), key=int):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue  # the listing's own descriptor, closed already
        kinds.append(target.split(":")[0] if ":[" in target else target)
    print("FDS=" + ",".join(kinds))


    def forward(x, residual, weight):
        return x, residual
""")


def _evaluator(fork: bool) -> Evaluator:
    return Evaluator(load_task(RMSNORM), "interpreter", limits=PhaseLimits(default=120),
                     pool=WorkerPool(interpret=True, spares=False, fork=fork))


def _close(ev: Evaluator) -> None:
    ev.close()
    ev.pool.close()  # given to the evaluator, so not its to close


def _verdict(result) -> tuple:
    return result.error, [(w.name, w.correct, w.message) for w in result.workloads]


def _server():
    server = forkserver._servers.get((True, None))
    assert server is not None, "no fork server was started for the interpreter"
    return server


def _gone(pid: int) -> bool:
    return wait_until(lambda: process_gone(pid))


def test_a_forked_worker_gives_the_verdict_layers_and_descriptors_an_execd_one_gives(tmp_path, monkeypatch):
    forked, execd = _evaluator(fork=True), _evaluator(fork=False)
    try:
        for path in (forked.task.reference_path, wrong_solution("fused_add_rmsnorm_no_weight", tmp_path)):
            a, b = forked.evaluate(path, seed=3), execd.evaluate(path, seed=3)
            assert _verdict(a) == _verdict(b), (a, b)
            assert a.correct == (path == forked.task.reference_path)
            assert a.sandbox == b.sandbox, (a.sandbox, b.sandbox)
        assert _server().alive() and all(w.server is None for w in execd.pool.idle().values())
        monkeypatch.setattr(ev_module, "check_solution", lambda source, allowed: [])
        (tmp_path / "solution.py").write_text(DESCRIPTORS)
        a, b = forked.evaluate(tmp_path / "solution.py"), execd.evaluate(tmp_path / "solution.py")
        held = [line for line in a.output.splitlines() if line.startswith("FDS=")]
        assert held and held == [line for line in b.output.splitlines() if line.startswith("FDS=")], \
            (a.output, b.output)
        assert "socket" not in held[0], held  # nothing of the server's socket
    finally:
        _close(forked)
        _close(execd)


def test_every_pool_of_the_process_shares_one_fork_server_which_outlives_them():
    first, second = _evaluator(fork=True), _evaluator(fork=True)
    try:
        assert first.evaluate(first.task.reference_path).correct
        server = _server()
        _close(first)
        assert server.alive() and not reaper.descendants(server._proc.pid), "a supervisor outlived its pool"
        assert second.evaluate(second.task.reference_path).correct
        assert _server() is server
    finally:
        _close(second)


def test_a_killed_fork_server_takes_its_supervisors_down_and_is_replaced():
    ev = Evaluator(load_task(RMSNORM), "interpreter", limits=PhaseLimits(default=120),
                   pool=WorkerPool(interpret=True, spares=True, fork=True))
    try:
        assert ev.evaluate(ev.task.reference_path).correct
        old = _server()
        spares = dict(ev.pool.idle())
        tree = [p for s in spares.values() for p in (s._proc.pid, *reaper.descendants(s._proc.pid))]
        os.kill(old._proc.pid, signal.SIGKILL)
        assert all(_gone(p) for p in tree), "a supervisor or worker outlived its fork server"
        result = ev.evaluate(ev.task.reference_path)
        assert result.correct, (result.error, result.output)
        assert _server() is not old and _server().alive()
        assert not old.directory.exists()
        assert not any(s.directory.exists() for s in spares.values())
    finally:
        _close(ev)


def test_a_fork_server_whose_directory_was_removed_is_replaced():
    """A temp cleaner (or a test that removed the temporary directory the server started in) leaves
    a running server that can fork nothing: the next evaluation starts a new one."""
    ev = Evaluator(load_task(RMSNORM), "interpreter", limits=PhaseLimits(default=120),
                   pool=WorkerPool(interpret=True, spares=False, fork=True))
    try:
        assert ev.evaluate(ev.task.reference_path).correct
        old = _server()
        tempdirs.remove_tree(old.directory)
        result = ev.evaluate(ev.task.reference_path)
        assert result.correct, (result.error, result.output)
        assert _server() is not old and _server().alive()
    finally:
        _close(ev)


def test_the_fork_server_outlives_the_thread_whose_evaluation_started_it():
    """PR_SET_PDEATHSIG fires when the starting *thread* ends: the servers' own thread starts them."""
    pool = WorkerPool(interpret=True, spares=True, fork=True)
    ev = Evaluator(load_task(RMSNORM), "interpreter", limits=PhaseLimits(default=120), pool=pool)
    try:
        first = evaluated_on_a_thread_that_ended(ev)
        assert first.correct, first.error
        server, spares = _server(), dict(pool.idle())
        assert server.thread.name == "d2k-fork-servers" and server.thread.is_alive()
        # The thread's spares live on (they die with the server, not the thread), and serve this one.
        assert spares and all(s.alive() for s in spares.values())
        assert ev.evaluate(ev.task.reference_path).correct
        assert _server() is server and server.alive()
        assert not set(pool.idle().values()) & set(spares.values()), "the spares were not used"
    finally:
        _close(ev)


PROCESS_WITH_A_SERVER = textwrap.dedent("""
    import json, signal, sys, time
    signal.signal(signal.SIGHUP, signal.SIG_IGN)  # as under nohup: every child inherits it
    from d2k_env.evaluator import Evaluator, PhaseLimits, forkserver
    from d2k_env.task import load_task

    ev = Evaluator(load_task("fused_add_rmsnorm"), "interpreter", limits=PhaseLimits(default=120), spares=False)
    assert ev.evaluate(ev.task.reference_path).correct
    server = forkserver._servers[(True, None)]
    print(json.dumps([server._proc.pid, str(server.directory)]), flush=True)
    if sys.argv[1] == "wait":
        time.sleep(600)
""")


@pytest.mark.parametrize("end", ["exit", "killed"])
def test_the_fork_server_ends_with_its_process(end):
    """Ended normally, the process removes the server's directory; SIGKILLed, the server still dies
    (its parent-death signal, though the process ran as under ``nohup``), and the next process's
    sweep removes the directory."""
    env = {**os.environ, "PYTHONPATH": str(Path(ev_module.__file__).resolve().parents[2])}
    proc = subprocess.Popen([sys.executable, "-c", PROCESS_WITH_A_SERVER, "wait" if end == "killed" else "exit"],
                            stdout=subprocess.PIPE, text=True, env=env)
    try:
        pid, directory = json.loads(proc.stdout.readline())
        if end == "killed":
            proc.kill()
    finally:
        proc.wait(timeout=120)
    assert _gone(pid), "the fork server outlived its process"
    if end == "killed":
        tempdirs.sweep()
    assert not os.path.exists(directory)


def test_a_spare_told_no_request_will_come_removes_its_directory_though_its_server_lives_on():
    """Its env died (or closed it): nobody else will remove the directory. A fork server outlives
    its env by a moment, so the supervisor cannot wait to see its parent change: the EOF decides."""
    ev = Evaluator(load_task(RMSNORM), "interpreter", limits=PhaseLimits(default=120),
                   pool=WorkerPool(interpret=True, spares=True, fork=True))
    try:
        assert ev.evaluate(ev.task.reference_path).correct
        server = _server()
        spare = next(iter(ev.pool.idle().values()))
        assert wait_until(lambda: reaper.descendants(spare._proc.pid)), "the spare started no worker"
        spare._proc.stdin.close()  # what the env's death does to it
        assert _gone(spare._proc.pid) and wait_until(lambda: not spare.directory.exists())
        assert server.alive()
    finally:
        _close(ev)
