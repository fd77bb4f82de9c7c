"""What the evaluation child can and cannot see: environment, arguments, network, packages; and
that no process it starts outlives the evaluation."""

import dataclasses
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from d2k_env.evaluator import Evaluator, PhaseLimits, sandbox
from d2k_env.evaluator.protocol import EvalRequest
from d2k_env.evaluator.confine import landlock_abi
from d2k_env.evaluator.sandbox import _limit_child, child_environment, run_worker
from d2k_env.task import load_task, project_root

# Behind a bypassed static policy (defence in depth): a solution that reports what it can see.
SNOOP = textwrap.dedent("""
    import json, os, sys, socket
    import torch, triton, triton.language as tl

    @triton.jit
    def _k(p):
        pass

    def network():
        try:
            socket.create_connection(("127.0.0.1", 9), timeout=2)
            return "connected"
        except OSError as exc:
            return type(exc).__name__ + ": " + str(exc)

    print("SNOOP " + json.dumps({"env": dict(os.environ), "argv": sys.argv, "cwd": os.getcwd(),
                                 "path": sys.path, "network": network()}))

    def forward(x, r, w):
        _k[(1,)](x)
        raise RuntimeError("done snooping")
""")


@pytest.fixture(scope="module")
def snooped(tmp_path_factory):
    path = tmp_path_factory.mktemp("ws") / "solution.py"
    path.write_text(SNOOP)
    (path.parent / "torch.py").write_text("raise SystemExit('workspace shadowed torch')\n")
    mp = pytest.MonkeyPatch()
    mp.setattr("d2k_env.evaluator.check_solution", lambda source, allowed: [])
    mp.setenv("OPENAI_API_KEY", "sk-should-never-leak")
    ev = Evaluator(load_task("fused_add_rmsnorm"), "interpreter", limits=PhaseLimits(default=60))
    result = ev.evaluate(path, seed=1234567891234)
    ev.close()
    mp.undo()
    line = next(l for l in result.output.splitlines() if l.startswith("SNOOP "))
    return json.loads(line[len("SNOOP "):]), path


def test_secrets_and_the_seed_are_not_in_the_childs_environment_or_arguments(snooped):
    seen, _ = snooped
    assert "OPENAI_API_KEY" not in seen["env"]
    assert not any("1234567891234" in v for v in list(seen["env"].values()) + seen["argv"])
    assert seen["env"]["HOME"] == seen["cwd"] and seen["env"]["TMPDIR"] == seen["cwd"]


def test_the_workspace_is_not_on_sys_path(snooped):
    seen, path = snooped
    assert str(path.parent) not in seen["path"] and seen["cwd"] != str(path.parent)


def test_no_network_where_a_private_namespace_is_allowed(snooped):
    seen, _ = snooped
    probe = subprocess.run([sys.executable, "-c", "import os; os.unshare(os.CLONE_NEWNET)"
                            if sys.version_info >= (3, 12) else
                            "import ctypes, sys; sys.exit(ctypes.CDLL(None, use_errno=True).unshare(0x40000000))"],
                           capture_output=True)
    if probe.returncode != 0:
        pytest.skip("this OS does not allow a private network namespace here")
    # Landlock refuses the connect (EACCES) before the empty namespace could find no route.
    network = seen["network"].lower()
    assert "unreachable" in network or "permission denied" in network, seen["network"]


def test_child_environment_is_an_allowlist(monkeypatch, tmp_path):
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "x")
    monkeypatch.setenv("TRITON_INTERPRET", "0")
    env = child_environment(str(tmp_path), tmp_path / "cache", interpret=True)
    assert "AWS_SECRET_ACCESS_KEY" not in env and env["TRITON_INTERPRET"] == "1"
    assert env["TRITON_CACHE_DIR"] == str(tmp_path / "cache") and env["CUDA_VISIBLE_DEVICES"] == ""


def test_resource_limits_bind_the_child():
    code = "import resource; print(resource.getrlimit(resource.RLIMIT_FSIZE)[0], resource.getrlimit(resource.RLIMIT_CPU)[0])"
    out = subprocess.run([sys.executable, "-c", code], preexec_fn=lambda: _limit_child(False), capture_output=True, text=True)
    fsize, cpu = map(int, out.stdout.split())
    assert 0 < fsize < 2**40 and 0 < cpu <= 3600


# -- no process started by an evaluation outlives it ----------------------------------------------------

# Behind a bypassed static policy: at import, the solution starts three processes that try to leave the
# worker's process group (setsid + double fork, setsid, setpgid), each writing "pid starttime" to
# PID_DIR and closing every inherited descriptor (so the evaluation itself ends normally). Then it
# stops its supervisor when told (and only if its parent is the supervisor) and sleeps HOLD seconds.
# No forward(): the evaluation fails to load, which does not matter here. Every stray exits after
# 60 s on its own.
STRAYS = textwrap.dedent("""
    import os, signal, time

    PID_DIR, HOLD, STOP_SUPERVISOR = @PID_DIR@, @HOLD@, @STOP_SUPERVISOR@
    STRAYS = ("double-fork", "setsid", "setpgid")

    def _record(name, pid=None):
        pid = pid or os.getpid()
        start = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[19]
        with open(os.path.join(PID_DIR, name + ".tmp"), "w") as f:
            f.write(f"{pid} {start}")
        os.rename(os.path.join(PID_DIR, name + ".tmp"), os.path.join(PID_DIR, name + ".pid"))

    def _stray(name):
        os.closerange(0, 4096)
        _record(name)
        time.sleep(60)
        os._exit(0)

    if STOP_SUPERVISOR and "reaper.py" in open(f"/proc/{os.getppid()}/cmdline").read():
        try:
            os.kill(os.getppid(), signal.SIGSTOP)
        except PermissionError:  # Landlock's signal scope: the supervisor is outside the worker's domain
            _record("stop-refused")
    _record("worker")
    _record("parent", os.getppid())  # the supervisor (the env, without one)
    def _new_session():
        try:
            os.setsid()
        except PermissionError:  # the sandbox's seccomp layer refuses new sessions: a new group instead
            os.setpgid(0, 0)

    if (pid := os.fork()) == 0:
        _new_session()
        if os.fork() == 0:
            _stray("double-fork")
        os._exit(0)
    os.waitpid(pid, 0)
    if os.fork() == 0:
        _new_session()
        _stray("setsid")
    if os.fork() == 0:
        os.setpgid(0, 0)
        _stray("setpgid")
    deadline = time.monotonic() + 20
    while not all(os.path.exists(os.path.join(PID_DIR, n + ".pid")) for n in STRAYS):
        if time.monotonic() > deadline:
            break
        time.sleep(0.02)
    time.sleep(HOLD)
""")
STRAY_NAMES = ("double-fork", "setsid", "setpgid")


def _solution(tmp_path: Path, hold: float = 0, stop_supervisor: bool = False) -> tuple[Path, Path]:
    pids = tmp_path / "pids"
    pids.mkdir()
    path = tmp_path / "solution.py"
    path.write_text(STRAYS.replace("@PID_DIR@", repr(str(pids))).replace("@HOLD@", repr(hold))
                    .replace("@STOP_SUPERVISOR@", repr(stop_supervisor)))
    return path, pids


def _request(path: Path, tmp_path: Path) -> EvalRequest:
    return EvalRequest(task_id="fused_add_rmsnorm", root=str(project_root()), solution_path=str(path), mode="test",
                       device="cpu", workloads=["5x200"], smoke=True, seed=1, outputs_dir=str(tmp_path))


def _recorded(pids: Path, names) -> dict[str, tuple[int, str]]:
    out = {}
    for name in names:
        f = pids / f"{name}.pid"
        if f.exists():
            pid, start = f.read_text().split()
            out[name] = int(pid), start
    return out


def _state(pid: int, start: str) -> str | None:
    """The state letter of the process (pid, starttime), None once it is reaped (a zombie shows 'Z')."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return fields[0] if fields[19] == start else None


def _existing(procs: dict[str, tuple[int, str]], zombies_count_as_dead: bool = False) -> dict[str, str]:
    found = {name: _state(*p) for name, p in procs.items()}
    return {n: s for n, s in found.items() if s is not None and not (zombies_count_as_dead and s == "Z")}


def _cleanup(procs: dict[str, tuple[int, str]]) -> None:
    for name, (pid, start) in procs.items():  # only our own strays, by pid and start time
        if _state(pid, start) not in (None, "Z"):
            os.kill(pid, signal.SIGKILL)


@pytest.fixture(autouse=True)
def no_namespaces(monkeypatch):
    """These tests follow the worker's processes by the pids they record, which a worker in a PID
    namespace of its own cannot tell (it sees its namespace's); so they test the supervisor's own
    guarantee, as on a machine without namespaces. tests/test_namespaces.py tests the namespaces."""
    monkeypatch.setenv(sandbox.NAMESPACES_VAR, "0")


@pytest.fixture
def processes_allowed(monkeypatch):
    """The GPU backend's sandbox (Triton runs ptxas), with the strays' pid directory writable: the
    supervisor's guarantee is tested where processes can be made at all."""
    confinement_for = sandbox.confinement_for

    def allowing(scratch, triton_cache, task_root, outputs_dir, *rest):
        c = confinement_for(scratch, triton_cache, task_root, outputs_dir, *rest)
        c.processes, c.write = True, c.write + [str(Path(outputs_dir) / "pids")]
        return c
    monkeypatch.setattr(sandbox, "confinement_for", allowing)


def test_the_interpreter_sandbox_refuses_every_new_process(tmp_path):
    path, pids = _solution(tmp_path)
    outcome = run_worker(_request(path, tmp_path), limits=PhaseLimits(default=60), triton_cache=tmp_path / "cache",
                         interpret=True)
    result = outcome.result or {}
    assert "PermissionError: [Errno 1] Operation not permitted" in result.get("error", ""), outcome
    assert not _recorded(pids, STRAY_NAMES) and "no new processes" in result["sandbox"]["seccomp"]


def test_no_process_started_by_the_evaluation_survives_it(tmp_path, processes_allowed):
    path, pids = _solution(tmp_path)
    started = time.monotonic()
    outcome = run_worker(_request(path, tmp_path), limits=PhaseLimits(default=60), triton_cache=tmp_path / "cache",
                         interpret=True)
    took = time.monotonic() - started
    procs = _recorded(pids, ("worker", *STRAY_NAMES))
    try:
        assert set(procs) == {"worker", *STRAY_NAMES}, f"the strays never started: {outcome.output}"
        # Gone and reaped: not even a zombie is left.
        assert not _existing(procs), f"outlived the evaluation: {_existing(procs)}"
        assert outcome.stopped is None and "forward" in (outcome.result or {}).get("error", ""), outcome
        assert outcome.strays >= len(STRAY_NAMES), outcome  # the supervisor reaped them
        assert took < 30, took
    finally:
        _cleanup(procs)


DRIVER = textwrap.dedent("""
    import sys
    import d2k_env.evaluator as ev
    from d2k_env.task import load_task

    ev.check_solution = lambda source, allowed: []  # the static policy bypassed, as in the red-team tests
    confinement_for = ev.sandbox.confinement_for  # and processes allowed, as on the GPU backend

    def allowing(*args):
        c = confinement_for(*args)
        c.processes, c.write = True, c.write + [sys.argv[2]]
        return c
    ev.sandbox.confinement_for = allowing
    evaluator = ev.Evaluator(load_task("fused_add_rmsnorm"), "interpreter", limits=ev.PhaseLimits(default=120))
    evaluator.evaluate(sys.argv[1])
""")


def test_nothing_survives_when_the_env_process_is_killed(tmp_path):
    """A SIGKILLed env (say, `d2k run`) leaves neither the worker nor anything it started behind."""
    path, pids = _solution(tmp_path, hold=60)
    driver = subprocess.Popen([sys.executable, "-c", DRIVER, str(path), str(pids)], stdout=subprocess.DEVNULL,
                              stderr=subprocess.PIPE)
    procs: dict = {}
    supervisor: dict = {}
    try:
        deadline = time.monotonic() + 90
        while len(procs := _recorded(pids, ("worker", *STRAY_NAMES))) < 4 and time.monotonic() < deadline:
            assert driver.poll() is None, driver.stderr.read().decode()
            time.sleep(0.05)
        assert len(procs) == 4, "the evaluation never got going"
        supervisor = _recorded(pids, ["parent"])
        assert _state(*procs["worker"]) not in (None, "Z"), "the worker should be sleeping in its solution"
        driver.kill()
        driver.wait()
        killed = time.monotonic()
        while _existing(procs) or _existing(supervisor, zombies_count_as_dead=True):
            if time.monotonic() - killed > 10:
                break
            time.sleep(0.05)
        assert not _existing(procs), f"outlived the env: {_existing(procs)}"  # gone and reaped
        # The supervisor's zombie, if any, is its new parent's (init's) to reap.
        assert not _existing(supervisor, zombies_count_as_dead=True), "the supervisor outlived the env"
    finally:
        if driver.poll() is None:
            driver.kill()
            driver.wait()
        _cleanup({**procs, **supervisor})


def test_a_stopped_supervisor_neither_hangs_the_env_nor_lets_the_strays_escape(tmp_path, monkeypatch,
                                                                               processes_allowed):
    """The solution SIGSTOPs its supervisor: past the grace period the env kills what it finds under it.
    Where Landlock scopes signals (ABI 6+) the stop itself is refused, and the strays die as usual."""
    monkeypatch.setattr(sandbox, "SUPERVISOR_GRACE_S", 1.0)
    path, pids = _solution(tmp_path, stop_supervisor=True)
    started = time.monotonic()
    outcome = run_worker(_request(path, tmp_path), limits=PhaseLimits(default=60), triton_cache=tmp_path / "cache",
                         interpret=True)
    took = time.monotonic() - started
    procs = _recorded(pids, ("worker", *STRAY_NAMES))
    try:
        assert set(procs) == {"worker", *STRAY_NAMES}, f"the strays never started: {outcome.output}"
        assert bool(_recorded(pids, ["stop-refused"])) == (landlock_abi() >= 6)
        # Killed; with the supervisor gone, their zombies are init's to reap.
        assert not _existing(procs, zombies_count_as_dead=True), f"outlived the evaluation: {_existing(procs)}"
        assert "forward" in (outcome.result or {}).get("error", ""), outcome
        assert took < 30, took
    finally:
        _cleanup(procs)


FORGER = textwrap.dedent("""
    import os, sys

    # Behind a bypassed policy: write on the result channel as the harness would, but without its nonce.
    os.write(int(sys.argv[1]), @LINE@)

    def forward(x, r, w):
        raise RuntimeError("never called")
""")


@pytest.mark.parametrize("line", [
    b'{"result": {"mode": "test", "backend": "interpreter", "workloads": [], "error": null}}\n',
    b'{"phase": "load"}\n',  # a phase change would restart the phase's time limit
    b"\xff\xfe not UTF-8\n",
], ids=["result", "phase", "not-utf8"])
def test_a_message_without_the_harness_nonce_ends_the_evaluation(tmp_path, line):
    path = tmp_path / "solution.py"
    path.write_text(FORGER.replace("@LINE@", repr(line)))
    req = dataclasses.replace(_request(path, tmp_path), nonce="the-harness-secret")
    outcome = run_worker(req, limits=PhaseLimits(default=60), triton_cache=tmp_path / "cache", interpret=True)
    assert outcome.result is None and outcome.stopped and "[forged-result]" in outcome.stopped, outcome
