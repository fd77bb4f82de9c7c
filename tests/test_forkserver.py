"""The fork server: a worker forked from it must be the worker exec would have started (same verdict,
same layers, no descriptor more), and the server must never outlive its pool or its thread, and be
replaced when it dies."""

import os
import signal
import textwrap
import threading
from pathlib import Path

import d2k_env.evaluator as ev_module
from conftest import process_gone, wait_until
from d2k_env.evaluator import Evaluator, PhaseLimits
from d2k_env.evaluator import reaper
from d2k_env.evaluator.pool import WorkerPool
from d2k_env.task import load_task

SOLUTIONS = Path(__file__).parent / "solutions"
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


def _server(ev: Evaluator):
    server = ev.pool._servers.get(threading.current_thread())
    assert server is not None, "the pool started no fork server for this thread"
    return server


def _gone(pid: int) -> bool:
    return wait_until(lambda: process_gone(pid))


def test_a_forked_worker_gives_the_verdict_layers_and_descriptors_an_execd_one_gives(tmp_path, monkeypatch):
    forked, execd = _evaluator(fork=True), _evaluator(fork=False)
    try:
        for path in (forked.task.reference_path, SOLUTIONS / "wrong" / "fused_add_rmsnorm_no_weight.py"):
            a, b = forked.evaluate(path, seed=3), execd.evaluate(path, seed=3)
            assert _verdict(a) == _verdict(b), (a, b)
            assert a.correct == (path == forked.task.reference_path)
            assert a.sandbox == b.sandbox, (a.sandbox, b.sandbox)
        assert forked.pool._servers and not execd.pool._servers
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


def test_the_fork_server_ends_with_its_pool_and_leaves_nothing_behind():
    ev = _evaluator(fork=True)
    assert ev.evaluate(ev.task.reference_path).correct
    server = _server(ev)
    pid, directory = server._proc.pid, server.directory
    assert not reaper.descendants(pid), "a supervisor outlived its evaluation"
    _close(ev)
    assert _gone(pid) and not directory.exists()


def test_a_killed_fork_server_takes_its_supervisors_down_and_is_replaced():
    ev = Evaluator(load_task(RMSNORM), "interpreter", limits=PhaseLimits(default=120),
                   pool=WorkerPool(interpret=True, spares=True, fork=True))
    try:
        assert ev.evaluate(ev.task.reference_path).correct
        old = _server(ev)
        spares = dict(ev.pool.idle())
        tree = [p for s in spares.values() for p in (s._proc.pid, *reaper.descendants(s._proc.pid))]
        os.kill(old._proc.pid, signal.SIGKILL)
        assert all(_gone(p) for p in tree), "a supervisor or worker outlived its fork server"
        result = ev.evaluate(ev.task.reference_path)
        assert result.correct, (result.error, result.output)
        assert _server(ev) is not old and _server(ev).alive()
        assert not old.directory.exists()
        assert not any(s.directory.exists() for s in spares.values())
    finally:
        _close(ev)


def test_the_fork_server_dies_with_the_thread_that_started_it():
    pool = WorkerPool(interpret=True, spares=False, fork=True)
    ev = Evaluator(load_task(RMSNORM), "interpreter", limits=PhaseLimits(default=120), pool=pool)
    try:
        results, servers = [], []
        def evaluate():
            results.append(ev.evaluate(ev.task.reference_path))
            servers.append(_server(ev))
        thread = threading.Thread(target=evaluate)
        thread.start()
        thread.join()
        assert results[0].correct, results[0].error
        assert _gone(servers[0]._proc.pid), "the fork server outlived its thread"
        # This thread gets a server of its own, and its evaluation the same verdict.
        assert ev.evaluate(ev.task.reference_path).correct
        assert _server(ev) is not servers[0] and list(pool._servers) == [threading.current_thread()]
        assert not servers[0].directory.exists()
    finally:
        _close(ev)


def test_each_thread_gets_a_fork_server_of_its_own_and_close_ends_them_all():
    pool = WorkerPool(interpret=True, spares=False, fork=True)
    try:
        mine, seen, done = pool._fork_server(), [], threading.Event()
        def other():
            seen.append(pool._fork_server())
            done.wait(60)  # alive until checked: a server dies with its thread
        thread = threading.Thread(target=other)
        thread.start()
        assert wait_until(lambda: seen)
        assert seen[0] is not mine and pool._fork_server() is mine and len(pool._servers) == 2
    finally:
        pool.close()
        done.set()
        thread.join()
    assert _gone(mine._proc.pid) and _gone(seen[0]._proc.pid)



def test_a_spare_told_no_request_will_come_removes_its_directory_though_its_server_lives_on():
    """Its env died (or closed it): nobody else will remove the directory. A fork server outlives
    its env by a moment, so the supervisor cannot wait to see its parent change: the EOF decides."""
    ev = Evaluator(load_task(RMSNORM), "interpreter", limits=PhaseLimits(default=120),
                   pool=WorkerPool(interpret=True, spares=True, fork=True))
    try:
        assert ev.evaluate(ev.task.reference_path).correct
        server = _server(ev)
        spare = next(iter(ev.pool.idle().values()))
        assert wait_until(lambda: reaper.descendants(spare._proc.pid)), "the spare started no worker"
        spare._proc.stdin.close()  # what the env's death does to it
        assert _gone(spare._proc.pid) and wait_until(lambda: not spare.directory.exists())
        assert server.alive()
    finally:
        _close(ev)
