"""The machine-wide GPU lease, across processes: a timed phase waits for another process's timed
phase and for its untimed ones, untimed phases share, a killed holder's lease is dropped, and one GPU
has one lease key whatever its index.

No GPU is needed: the holder is another process holding the same lease file an evaluator's phase
takes (``leased``), and the evaluator is the GPU submit path with stub workers (see
test_submit_memcheck). Whether a lease is held is asked of the kernel without blocking
(``LOCK_NB``); a wait that should end is given a minute on a loaded machine, never a sleep.
"""

from __future__ import annotations

import fcntl
import os
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import pytest

import d2k_env
import d2k_env.evaluator.gpu_lease as gpu_lease
from d2k_env.evaluator.gpu_lease import GpuLease, leased, physical_gpu
from test_submit_memcheck import StagedEvaluator

ROOT = Path(d2k_env.__file__).resolve().parents[1]
KEY = "pci-0000:3b:00.0"


def holder(directory: Path, exclusive: bool, key: str = KEY) -> subprocess.Popen:
    """Another process holding ``key``'s lease (as an evaluator's phase does) until its stdin closes."""
    script = textwrap.dedent(f"""
        import sys
        sys.path.insert(0, {str(ROOT)!r})
        from pathlib import Path
        from d2k_env.evaluator.gpu_lease import leased
        record = []
        with leased({key!r}, {exclusive!r}, "solution", record, Path({str(directory)!r})):
            print("held", flush=True)
            sys.stdin.read()
    """)
    proc = subprocess.Popen([sys.executable, "-c", script], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "held"
    return proc


def free(directory: Path, exclusive: bool, key: str = KEY) -> bool:
    """Whether a lease of this kind could be had right now (asked without waiting)."""
    lease = GpuLease(key, exclusive, directory)
    fd = os.open(lease.path, os.O_RDWR | os.O_CREAT)
    try:
        fcntl.flock(fd, (fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH) | fcntl.LOCK_NB)
        return True
    except BlockingIOError:
        return False
    finally:
        os.close(fd)


def test_a_timed_phase_excludes_every_other_phase_and_untimed_phases_share(tmp_path):
    timed = holder(tmp_path, exclusive=True)
    try:
        assert not free(tmp_path, exclusive=True) and not free(tmp_path, exclusive=False)
    finally:
        timed.stdin.close()
        timed.wait(60)
    untimed = holder(tmp_path, exclusive=False)
    try:
        assert free(tmp_path, exclusive=False), "an untimed phase waited for another untimed phase"
        assert not free(tmp_path, exclusive=True), "a timed phase could start beside an untimed one"
    finally:
        untimed.stdin.close()
        untimed.wait(60)
    assert free(tmp_path, exclusive=True)


def test_a_killed_holder_leaves_the_gpu_free(tmp_path):
    timed = holder(tmp_path, exclusive=True)
    assert not free(tmp_path, exclusive=True)
    timed.kill()
    timed.wait(60)
    assert free(tmp_path, exclusive=True), "the lease of a killed process was not dropped"


def _evaluate_in_thread(ev, mode):
    done, box = threading.Event(), {}

    def run():
        try:
            box["result"] = ev.evaluate(ev.task.reference_path, mode, seed=7)
        finally:
            ev.close()
            done.set()
    threading.Thread(target=run, daemon=True).start()
    return done, box


def test_an_evaluators_timed_phase_waits_for_another_processs_timed_phase(tmp_path, monkeypatch):
    monkeypatch.setattr(gpu_lease, "physical_gpu", lambda gpu=None: KEY)
    monkeypatch.setattr("d2k_env.evaluator.physical_gpu", lambda gpu=None: KEY)
    asking, entered = threading.Event(), threading.Event()
    real = d2k_env.evaluator.leased
    monkeypatch.setattr("d2k_env.evaluator.leased", lambda *a, **k: (asking.set(), real(*a, **k))[1])
    ev = StagedEvaluator(tmp_path)
    run = ev._run
    ev._run = lambda req, outputs=None, copy=False: (entered.set(), run(req, outputs, copy))[1]
    other = holder(tmp_path, exclusive=True)
    try:
        done, box = _evaluate_in_thread(ev, "benchmark")
        assert asking.wait(60), "the evaluation never asked for its lease"
        # Not a timing assertion: the phase may not start at all while the other process holds the GPU.
        assert not entered.wait(1.0), "the timed phase started while another process's timed phase held the GPU"
    finally:
        other.stdin.close()
        other.wait(60)
    assert done.wait(60) and entered.is_set()
    first, timed = box["result"].lease[0], next(r for r in box["result"].lease if r["exclusive"])
    assert timed["phase"] == "replay" and timed["gpu"] == first["gpu"] == KEY
    # Its first phase (the recording, shared) waited behind the other's exclusive lease at least as long
    # as it was seen not to start.
    assert first["phase"] == "solution" and first["waited_s"] >= 1.0


def test_an_evaluators_untimed_phases_do_not_wait_for_another_processs_untimed_phase(tmp_path, monkeypatch):
    monkeypatch.setattr("d2k_env.evaluator.physical_gpu", lambda gpu=None: KEY)
    other = holder(tmp_path, exclusive=False)
    try:
        done, box = _evaluate_in_thread(StagedEvaluator(tmp_path), "test")
        assert done.wait(60), "a correctness-only evaluation waited for another process's untimed phase"
        assert [(r["phase"], r["exclusive"]) for r in box["result"].lease] == [("solution", False), ("replay", False),
                                                                                ("check", False)]
    finally:
        other.stdin.close()
        other.wait(60)


def test_an_evaluators_timed_phase_proceeds_once_the_holder_is_killed(tmp_path, monkeypatch):
    monkeypatch.setattr("d2k_env.evaluator.physical_gpu", lambda gpu=None: KEY)
    asking, real = threading.Event(), d2k_env.evaluator.leased
    monkeypatch.setattr("d2k_env.evaluator.leased", lambda *a, **k: (asking.set(), real(*a, **k))[1])
    other = holder(tmp_path, exclusive=True)
    done, box = _evaluate_in_thread(StagedEvaluator(tmp_path), "submit")
    assert asking.wait(60) and not done.is_set()
    other.kill()
    other.wait(60)
    assert done.wait(60), "the killed holder's lease kept the GPU"
    assert any(r["phase"] == "replay" and r["exclusive"] for r in box["result"].lease)


def test_one_gpu_has_one_lease_whatever_its_index(monkeypatch):
    """Two processes naming one GPU differently (an index in two CUDA_VISIBLE_DEVICES lists) get the
    key of its PCI bus id; the key falls back to the name only where no driver answers."""
    answers = {"1": "0000:3B:00.0", "GPU-8f2e": "0000:3B:00.0", "0": "0000:5E:00.0"}

    def run(argv, env, **_):
        bus = answers.get(env.get("CUDA_VISIBLE_DEVICES", "").split(",")[0])
        return subprocess.CompletedProcess(argv, 0 if bus else 3, stdout=f"{bus}\n" if bus else "", stderr="")
    monkeypatch.setattr(gpu_lease.subprocess, "run", run)
    gpu_lease._physical.cache_clear()
    try:
        assert physical_gpu("1") == physical_gpu("GPU-8f2e") == "pci-0000:3b:00.0"
        assert physical_gpu("0") == "pci-0000:5e:00.0"
        monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1,0")
        assert physical_gpu(None) == "pci-0000:3b:00.0"  # a worker without a gpu of its own uses the first
        assert physical_gpu("7") == "visible-7"
    finally:
        gpu_lease._physical.cache_clear()


def test_a_lease_is_not_taken_twice_by_one_holder(tmp_path):
    lease = GpuLease(KEY, True, tmp_path)
    with lease, pytest.raises(RuntimeError, match="already held"):
        lease.acquire()
    assert not lease.held


def test_a_service_job_holds_the_lease_for_the_whole_job_and_says_so(tmp_path, monkeypatch):
    from d2k_env.evaluator.protocol import EvalResult
    from d2k_env.service import EvalJob, LocalService

    monkeypatch.setattr(LocalService, "_evaluate", lambda self, lane, pool, pending: EvalResult(pending.job.mode, "cuda"))
    with LocalService("cuda", gpus=["5"], lanes_per_gpu=1, spares=False, lease_dir=tmp_path) as service:
        timed, untimed = (service.submit(EvalJob("fused_add_rmsnorm", "", m)).result(60) for m in ("submit", "test"))
    assert [(r["phase"], r["exclusive"], r["gpu"]) for r in timed.lease] == [("job", True, physical_gpu("5"))]
    assert [(r["phase"], r["exclusive"]) for r in untimed.lease] == [("job", False)]
