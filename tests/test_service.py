"""The local evaluation service: scheduling over GPUs (timed jobs alone, correctness-only jobs
shared, across processes through the leases), real evaluations on the interpreter, envs sharing one
service, and nothing left behind.

The scheduling tests replace the evaluation with a recorder (a GPU is not needed to check who runs
beside whom); every other test evaluates for real on Triton's interpreter, with fixed seeds.
"""

from __future__ import annotations

import copy
import os
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
from pathlib import Path

import gymnasium as gym
import pytest

import d2k_env
from d2k_env.evaluator.protocol import EvalResult
from d2k_env.service import EvalJob, LocalService, make_service
from d2k_env.service.gpus import GpuLease
from d2k_env.task import load_task

RMSNORM = "fused_add_rmsnorm"
ROOT = Path(d2k_env.__file__).resolve().parents[1]


class Recorder:
    """Stands in for the evaluation: records (gpu, timed, start, end) and sleeps ``seconds``."""

    def __init__(self, seconds: float = 0.15):
        self.seconds, self.spans, self.lock = seconds, [], threading.Lock()

    def __call__(self, service, lane, pool, pending):
        start = time.monotonic()
        time.sleep(self.seconds)
        with self.lock:
            self.spans.append((lane.gpu, pending.timed, start, time.monotonic()))
        return EvalResult(pending.job.mode, service.backend)


def _overlap(a, b) -> bool:
    return a[2] < b[3] and b[2] < a[3]


@pytest.fixture
def recorded(monkeypatch, tmp_path):
    recorder = Recorder()
    monkeypatch.setattr(LocalService, "_evaluate", lambda self, lane, pool, pending: recorder(self, lane, pool, pending))
    return recorder, tmp_path


def test_a_timed_job_has_its_gpu_to_itself_and_correctness_jobs_share(recorded):
    recorder, leases = recorded
    with LocalService("cuda", gpus=["0", "1"], lanes_per_gpu=2, spares=False, lease_dir=leases) as service:
        modes = ["test", "benchmark", "test", "test", "submit", "test", "profile", "test", "test", "benchmark"] * 2
        futures = [service.submit(EvalJob(RMSNORM, "", mode)) for mode in modes]
        results = [f.result(timeout=60) for f in futures]
    spans = recorder.spans
    assert len(spans) == len(modes)
    for i, a in enumerate(spans):
        for b in spans[i + 1:]:
            if a[0] == b[0] and (a[1] or b[1]):
                assert not _overlap(a, b), f"a timed job shared GPU {a[0]}: {a} {b}"
    shared = [s for s in spans if not s[1]]
    assert any(_overlap(a, b) and a[0] == b[0] for i, a in enumerate(shared) for b in shared[i + 1:]), \
        "correctness-only jobs never ran side by side on one GPU"
    assert {r.queue["gpu"] for r in results} == {"0", "1"}
    assert all(set(r.queue) == {"lane", "gpu", "position", "waited_s", "started", "ended"} for r in results)
    assert results[-1].queue["position"] > 0  # submitted behind others


def test_timed_jobs_of_two_processes_never_share_a_gpu(tmp_path):
    """Two services in two processes, one GPU name, one lease directory: the leases keep timed
    jobs apart across processes."""
    script = textwrap.dedent(f"""
        import json, sys, time
        sys.path.insert(0, {str(ROOT)!r})
        from d2k_env.evaluator.protocol import EvalResult
        from d2k_env.service import EvalJob, LocalService
        spans = []
        def fake(self, lane, pool, pending):
            start = time.time(); time.sleep(0.2); spans.append((pending.timed, start, time.time()))
            return EvalResult(pending.job.mode, self.backend)
        LocalService._evaluate = fake
        with LocalService("cuda", gpus=["7"], lanes_per_gpu=2, spares=False, lease_dir={str(tmp_path)!r}) as s:
            for f in [s.submit(EvalJob("{RMSNORM}", "", m)) for m in ["benchmark", "test", "submit", "test"] * 3]:
                f.result()
        print(json.dumps(spans))
    """)
    procs = [subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True) for _ in range(2)]
    import json
    spans = [json.loads(p.communicate(timeout=120)[0]) for p in procs]
    for a in spans[0]:
        for b in spans[1]:
            if a[0] or b[0]:
                assert not (a[1] < b[2] and b[1] < a[2]), f"timed work of two processes overlapped: {a} {b}"


def test_a_lease_is_dropped_when_its_holder_dies(tmp_path):
    holder = subprocess.Popen([sys.executable, "-c", textwrap.dedent(f"""
        import sys, time
        sys.path.insert(0, {str(ROOT)!r})
        from pathlib import Path
        from d2k_env.service.gpus import GpuLease
        GpuLease("0", True, Path({str(tmp_path)!r})).acquire()
        print("held", flush=True)
        time.sleep(600)
    """)], stdout=subprocess.PIPE, text=True)
    assert holder.stdout.readline().strip() == "held"
    got = threading.Event()
    waiter = threading.Thread(target=lambda: (GpuLease("0", False, tmp_path).acquire(), got.set()), daemon=True)
    waiter.start()
    assert not got.wait(0.5), "a shared lease was granted beside an exclusive one"
    holder.kill()
    holder.wait()
    assert got.wait(10), "the dead holder's lease was never released"


def test_bad_jobs_and_arguments_are_refused_with_a_reason():
    with LocalService("interpreter", jobs=1) as service, pytest.raises(TypeError, match="EvalJob"):
        service.submit({"task_id": RMSNORM})
    with pytest.raises(TypeError, match="solution's text"):
        EvalJob(RMSNORM, Path("solution.py"))
    with pytest.raises(ValueError, match="jobs"):
        LocalService("interpreter", jobs=0)
    with pytest.raises(ValueError, match="unknown evaluation service"):
        make_service("cluster")
    service = LocalService("interpreter", jobs=1)
    service.close()
    with pytest.raises(RuntimeError, match="closed"):
        service.submit(EvalJob(RMSNORM, ""))


def test_real_evaluations_share_the_lanes_and_the_warm_workers():
    task = load_task(RMSNORM)
    reference = task.reference_path.read_text()
    wrong = reference.replace("def forward(", "def _unused(", 1) + "\n\ndef forward(*inputs):\n    return inputs[0]\n"
    with LocalService("interpreter", jobs=2) as service:
        jobs = [EvalJob(RMSNORM, reference, "test", seed=3), EvalJob(RMSNORM, wrong, "test", seed=3),
                EvalJob(RMSNORM, reference, "submit", seed=4)]
        results = [f.result(timeout=900) for f in [service.submit(job, task) for job in jobs]]
        assert results[0].correct and results[2].correct and any(w.heldout for w in results[2].workloads)
        assert not results[1].correct
        assert {r.queue["lane"] for r in results} <= {0, 1}
        assert service.stats()["running"] == 0 and service.stats()["queued"] == 0


def _tree(pid: int) -> set[int]:
    from d2k_env.evaluator import reaper
    return set(reaper.descendants(pid))


def _settles(before: set[int]) -> bool:
    """Whether this process's descendants come back to ``before`` within 30 s."""
    deadline = time.monotonic() + 30
    while not _tree(os.getpid()) <= before and time.monotonic() < deadline:
        time.sleep(0.1)
    return _tree(os.getpid()) <= before


def test_envs_sharing_a_service_in_threads_get_their_own_verdicts_and_nothing_is_left_behind(monkeypatch, tmp_path):
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))  # every directory of the envs and the service
    processes = _tree(os.getpid())
    reference = load_task(RMSNORM).reference_path.read_text()
    service = LocalService("interpreter", jobs=2)
    envs = [gym.make(d2k_env.env_id(RMSNORM), backend="interpreter", evaluator=service) for _ in range(3)]
    outcomes = {}

    def play(i, env):
        env.reset(seed=i)
        if i != 1:  # env 1 keeps the stub, which must fail
            env.step({"tool": "write_file", "args": {"path": "solution.py", "content": reference}})
        outcomes[i] = env.step({"tool": "run_tests", "args": {}})[4]

    threads = [threading.Thread(target=play, args=(i, env)) for i, env in enumerate(envs)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(900)
    assert [outcomes[i]["evaluation"]["correct"] for i in range(3)] == [True, False, True]
    assert all("waited_s" in outcomes[i]["queue"] for i in range(3))
    for env in envs:
        env.close()
    assert _tree(os.getpid()) - processes, "the shared service keeps its warm workers while it lives"
    service.close()
    assert _settles(processes), "a process outlived the service"
    assert not list(tmp_path.glob("d2k-*")), "a directory outlived the envs and the service"


def test_an_env_given_a_service_keeps_its_spec():
    """Gymnasium's env.spec is a deep copy of the spec, the service among its kwargs: the copy is
    the same service (before, copying raised and env.spec was None, with a warning per env)."""
    with LocalService("interpreter", jobs=1, spares=False) as service:
        env = gym.make(d2k_env.env_id(RMSNORM), backend="interpreter", evaluator=service)
        try:
            assert env.spec is not None and env.spec.kwargs["evaluator"] is service
            assert copy.deepcopy(service) is service
        finally:
            env.close()


HANGS = textwrap.dedent("""
    import os
    import time

    def forward(*inputs):
        with open("solution.pid", "w") as f:  # in its scratch directory, for the test to find
            f.write(str(os.getpid()))
        time.sleep(600)
""")


def test_a_worker_killed_mid_evaluation_is_an_error_step_and_the_next_evaluation_succeeds(monkeypatch, tmp_path):
    import d2k_env.evaluator as ev_module
    monkeypatch.setattr(ev_module, "check_solution", lambda source, allowed: [])  # time and open are refused
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))  # where the worker's scratch directory is made
    env = gym.make(d2k_env.env_id(RMSNORM), backend="interpreter")
    try:
        env.reset(seed=0)
        env.step({"tool": "write_file", "args": {"path": "solution.py", "content": HANGS}})
        killed = []

        def kill_the_worker():
            end = time.monotonic() + 300
            while time.monotonic() < end and not killed:
                for marker in tmp_path.glob("d2k-eval-*/scratch/solution.pid"):
                    try:
                        os.kill(int(marker.read_text()), 9)
                        killed.append(marker)
                    except (ValueError, ProcessLookupError):
                        pass  # written half, or gone already
                time.sleep(0.05)

        killer = threading.Thread(target=kill_the_worker)
        killer.start()
        obs, reward, terminated, truncated, info = env.step({"tool": "run_tests", "args": {}})
        killer.join()
        assert killed, "the worker never started the solution"
        assert not info["evaluation"]["correct"] and not terminated and reward == 0
        assert "signal 9" in obs or "SIGKILL" in obs or "killed" in obs, obs
        env.step({"tool": "write_file", "args": {"path": "solution.py",
                                                  "content": load_task(RMSNORM).reference_path.read_text()}})
        assert env.step({"tool": "run_tests", "args": {}})[4]["evaluation"]["correct"]
    finally:
        env.close()


def test_an_env_s_own_service_ends_with_it():
    from d2k_env.evaluator import policy_service
    policy_service.check_solution("", frozenset())  # the process's policy child, long-lived by design
    processes = _tree(os.getpid())
    env = gym.make(d2k_env.env_id(RMSNORM), backend="interpreter")
    env.reset(seed=0)
    env.step({"tool": "write_file", "args": {"path": "solution.py",
                                              "content": load_task(RMSNORM).reference_path.read_text()}})
    assert env.step({"tool": "run_tests", "args": {}})[4]["evaluation"]["correct"]  # and spares started
    assert _tree(os.getpid()) - processes
    env.close()
    assert _settles(processes)


def test_an_async_vector_env_evaluates_in_every_process_with_the_right_verdicts():
    processes = _tree(os.getpid())
    reference = load_task(RMSNORM).reference_path.read_text()
    vec = gym.make_vec(d2k_env.env_id(RMSNORM), num_envs=3, vectorization_mode="async", backend="interpreter")
    try:
        vec.reset(seed=[0, 1, 2])
        vec.step(({"tool": "list_files", "args": {}},
                  *({"tool": "write_file", "args": {"path": "solution.py", "content": reference}},) * 2))
        _, rewards, terminated, truncated, infos = vec.step(({"tool": "run_tests", "args": {}},) * 3)
        assert list(infos["evaluation"]["correct"]) == [False, True, True]
        assert not terminated.any() and not truncated.any() and (rewards == 0).all()
    finally:
        vec.close()
    assert _settles(processes), "a process of the vector env outlived its close()"


GPU_TIMED = textwrap.dedent(f"""
    import json, sys
    sys.path.insert(0, {str(ROOT)!r})
    from d2k_env.service import EvalJob, LocalService
    from d2k_env.task import load_task
    source = load_task(sys.argv[1]).reference_path.read_text()
    with LocalService("cuda", gpus=["0"], lanes_per_gpu=2) as service:
        futures = [service.submit(EvalJob(sys.argv[1], source, mode, seed=i))
                   for i, mode in enumerate(["benchmark", "test", "benchmark", "test"])]
        results = [f.result() for f in futures]
    print(json.dumps([[r.mode, r.correct, r.queue["started"], r.queue["ended"]] for r in results]))
""")


@pytest.mark.gpu
def test_timed_evaluations_never_share_the_gpu():
    """Two processes, each with its own service on GPU 0, benchmark and test the reference at once:
    every benchmark held the GPU alone, and every verdict is right."""
    import json
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU")
    procs = [subprocess.Popen([sys.executable, "-c", GPU_TIMED, task], stdout=subprocess.PIPE, text=True)
             for task in (RMSNORM, "merge_attn_states")]
    runs = [json.loads(p.communicate(timeout=900)[0]) for p in procs]
    assert all(correct for run in runs for _, correct, _, _ in run)
    spans = [(mode, start, end) for run in runs for mode, _, start, end in run]
    for i, a in enumerate(spans):
        for b in spans[i + 1:]:
            if "benchmark" in (a[0], b[0]):
                assert not (a[1] < b[2] and b[1] < a[2]), f"timed work shared the GPU: {a} {b}"


KILLED_DRIVER = textwrap.dedent(f"""
    import sys, time
    sys.path.insert(0, {str(ROOT)!r})
    import gymnasium as gym
    import d2k_env
    from d2k_env.task import load_task
    env = gym.make(d2k_env.env_id("{RMSNORM}"), backend="interpreter")
    env.reset(seed=0)
    env.step({{"tool": "write_file", "args": {{"path": "solution.py",
                                               "content": load_task("{RMSNORM}").reference_path.read_text()}}}})
    assert env.step({{"tool": "run_tests", "args": {{}}}})[4]["evaluation"]["correct"]
    print("evaluated", flush=True)
    time.sleep(600)
""")


def test_nothing_outlives_a_killed_driver(tmp_path):
    """SIGKILLed mid-episode (spares warm, a workspace, a cache, a service): its workers go with it,
    their supervisors remove their directories, and the next process to make a directory sweeps the
    rest."""
    from d2k_env import tempdirs
    driver = subprocess.Popen([sys.executable, "-c", KILLED_DRIVER], stdout=subprocess.PIPE, text=True,
                              env={**os.environ, "TMPDIR": str(tmp_path)})
    try:
        assert driver.stdout.readline().strip() == "evaluated"
        below = _tree(driver.pid)
        assert below and list(tmp_path.glob("d2k-*"))
    finally:
        driver.kill()
        driver.wait()
    deadline = time.monotonic() + 30
    while any(os.path.exists(f"/proc/{pid}") for pid in below) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not any(os.path.exists(f"/proc/{pid}") for pid in below), "a process outlived the killed driver"
    tempdirs.sweep(str(tmp_path))
    assert not list(tmp_path.glob("d2k-*")), list(tmp_path.glob("d2k-*"))
