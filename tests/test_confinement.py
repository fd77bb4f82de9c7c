"""The operating-system sandbox, tested with the static policy switched off (defence in depth):
whatever a solution's Python does, it reads no secret and touches nothing outside its scratch
directory, it cannot start processes on the interpreter or signal its supervisor, its memory is
bounded, and every way its process can die is named in the verdict. Each probe is a solution the
policy would refuse; here it runs, and reports what it could reach."""

import json
import os
import textwrap
from pathlib import Path

import pytest

from d2k_env.evaluator import Evaluator, PhaseLimits, sandbox
from d2k_env.evaluator.confine import landlock_abi
from d2k_env.evaluator.protocol import EvalRequest, inputs_key
from d2k_env.task import load_task

SEED, NONCE = 8675309123456789, "f00dfeedf00dfeedf00dfeedf00dfeed"

# Tries everything a solution past the policy might, and prints one JSON line of what worked.
PROBE = textwrap.dedent("""
    import gc, json, os, signal, socket, sys
    import torch, triton, triton.language as tl

    SEED, KEY, NONCE, PROJECT, WORKSPACE = @SEED@, @KEY@, @NONCE@, @PROJECT@, @WORKSPACE@
    reached = []

    def attempt(what, fn):
        try:
            fn()
            reached.append(what)
        except OSError:
            pass

    # Secrets: the env's seed and the channel's nonce, anywhere in this process or its parent's.
    # The inputs key is there (the harness draws inputs from it): finding it shows the scan works.
    for obj in gc.get_objects():
        if getattr(obj, "__dict__", None) is globals():  # this module holds them: it was told what to look for
            continue
        for value in (vars(obj).values() if hasattr(obj, "__dict__") else ()):
            if type(value) is int and value in (SEED, KEY):
                reached.append("the seed in memory" if value == SEED else "the inputs key in memory")
            elif type(value) is str and NONCE in value:
                reached.append("the nonce in memory")
    def parents_secrets():
        for name in ("cmdline", "environ", "mem"):
            with open(f"/proc/{os.getppid()}/{name}", "rb") as f:
                if NONCE.encode() in f.read(1 << 20):
                    reached.append("secret in the supervisor")
    attempt("parent's /proc", parents_secrets)
    # Files: the project's baseline and reference, the agent's workspace, /tmp, the check's snapshot.
    attempt("wrote the baseline", lambda: open(os.path.join(PROJECT, "baselines", "fused_add_rmsnorm.py"), "a"))
    attempt("read the reference", lambda: open(os.path.join(PROJECT, "references", "fused_add_rmsnorm.py")).read())
    attempt("read the workspace", lambda: os.listdir(WORKSPACE))
    attempt("wrote the workspace", lambda: open(os.path.join(WORKSPACE, "planted.py"), "w"))
    attempt("wrote /tmp", lambda: open("/tmp/d2k-planted", "w"))
    attempt("listed /tmp", lambda: os.listdir("/tmp"))
    # Processes, signals, network.
    def fork():
        if os.fork() == 0:
            os._exit(0)
    attempt("forked", fork)
    # In a PID namespace of its own the worker is process 1 and its parent lies outside (getppid()
    # says 0, and kill(0) would mean its own group): neither is another process to signal.
    if os.getppid() != 0:
        attempt("signalled the supervisor", lambda: os.kill(os.getppid(), 0))
    if os.getpid() != 1:
        attempt("signalled init", lambda: os.kill(1, 0))
    attempt("connected", lambda: socket.create_connection(("127.0.0.1", 22), timeout=1))
    attempt("new session", os.setsid)
    # What it may: its own scratch directory.
    with open(os.path.join(os.environ["HOME"], "scratch.txt"), "w") as f:
        f.write("fine")
    print("PROBE " + json.dumps(reached))

    @triton.jit
    def _k(p):
        pass

    def forward(x, r, w):
        _k[(1,)](x)
        raise RuntimeError("done probing")
""")


def _hidden(text: str) -> str:
    """An expression for ``text`` that does not hold it (the probe's source is in the request too)."""
    return f"{text[::-1]!r}[::-1]"


def _evaluate(tmp_path, monkeypatch, source: str, **kw):
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    path = workspace / "solution.py"
    path.write_text(source)
    monkeypatch.setattr("d2k_env.evaluator.check_solution", lambda source, allowed: [])  # the policy off
    monkeypatch.setattr("d2k_env.evaluator.secrets.token_hex", lambda n: NONCE)
    ev = Evaluator(load_task("fused_add_rmsnorm"), "interpreter", limits=PhaseLimits(default=90))
    try:
        return ev.evaluate(path, seed=SEED, **kw), workspace
    finally:
        ev.close()


@pytest.mark.parametrize("namespaces", ["1", "0"], ids=["namespaces", "landlock only"])
def test_past_the_policy_a_solution_reaches_no_secret_and_nothing_outside_its_scratch(tmp_path, monkeypatch,
                                                                                      namespaces):
    monkeypatch.setenv(sandbox.NAMESPACES_VAR, namespaces)
    project = Path(load_task("fused_add_rmsnorm").baseline_path).parents[1]
    baseline = (project / "baselines" / "fused_add_rmsnorm.py").read_bytes()
    source = (PROBE.replace("@SEED@", repr(SEED)).replace("@KEY@", repr(inputs_key(SEED)))
              .replace("@NONCE@", _hidden(NONCE))
              .replace("@PROJECT@", repr(str(project))).replace("@WORKSPACE@", repr(str(tmp_path / "workspace"))))
    result, workspace = _evaluate(tmp_path, monkeypatch, source)
    line = next((l for l in result.output.splitlines() if l.startswith("PROBE ")), None)
    assert line is not None, result.error or result.output
    # The solution process draws its inputs from a recording key: the inputs key never reaches it.
    assert sorted(set(json.loads(line[len("PROBE "):]))) == [], line
    assert (project / "baselines" / "fused_add_rmsnorm.py").read_bytes() == baseline
    assert sorted(p.name for p in workspace.iterdir()) == ["solution.py"]
    assert not Path("/tmp/d2k-planted").exists()


def test_every_layer_is_named_in_the_result(tmp_path, monkeypatch):
    result, _ = _evaluate(tmp_path, monkeypatch, PROBE.replace("@SEED@", "0").replace("@KEY@", "0").replace("@NONCE@", "'x'")
                          .replace("@PROJECT@", "'/nonexistent'").replace("@WORKSPACE@", "'/nonexistent'"))
    assert set(result.sandbox) == {"rlimits", "namespaces", "landlock", "uid", "seccomp", "cgroup"}, result.sandbox
    # What hid the references: empty mounts in the worker's own view, or Landlock stepping around them.
    assert result.sandbox["namespaces"].startswith(("mount, PID and IPC: a view of", "absent: ")), result.sandbox
    assert "hidden paths under empty mounts" in result.sandbox["namespaces"] or \
        "hidden paths stepped around" in result.sandbox["landlock"], result.sandbox
    if landlock_abi():
        assert result.sandbox["landlock"].startswith(f"ABI {landlock_abi()}")
    else:
        assert result.sandbox["landlock"].startswith("absent")


MEMORY_HOG = textwrap.dedent("""
    import torch, triton

    @triton.jit
    def _k(p):
        pass

    def forward(x, r, w):
        _k[(1,)](x)
        hog = torch.ones(@N@, dtype=torch.uint8)  # touched: resident, not only reserved
        return hog
""")


def test_running_out_of_memory_is_named(tmp_path, monkeypatch):
    """Over the cgroup's limit the kernel kills the worker; over the address space, the allocation
    fails. Either way the verdict says memory ran out, not only 'SIGKILL'. (Where no memory cgroup
    can be made, as on the H100 machine, the resident case has no limit to hit: its verdict is then
    not asserted, and the result must say the cgroup was absent.)"""
    monkeypatch.setattr(sandbox, "MEMORY_LIMIT", 2**30)
    monkeypatch.setattr(sandbox, "ADDRESS_SPACE_SLACK", 6 * 2**30)
    for name, size in (("resident", 3 * 2**30), ("address-space", 16 * 2**30)):
        (tmp_path / name).mkdir()
        result, _ = _evaluate(tmp_path / name, monkeypatch, MEMORY_HOG.replace("@N@", str(size)))
        if name == "resident" and result.sandbox.get("cgroup", "").startswith("absent"):
            continue
        verdict = result.error or " ".join(w.message for w in result.workloads)
        assert "[memory]" in verdict, (name, verdict)


def test_a_crash_of_the_check_process_is_named_with_its_error(tmp_path):
    """The check process reports its own failure (here: outputs that were never saved) with the
    exception, instead of dying as an unexplained SIGKILL."""
    req = EvalRequest(task_id="fused_add_rmsnorm", root=str(load_task("fused_add_rmsnorm").root),
                      solution_path="", mode="test", device="cpu", workloads=["5x200"], smoke=True, seed=1,
                      role="check", outputs_dir=str(tmp_path))
    outcome = sandbox.run_worker(req, limits=PhaseLimits(default=90), triton_cache=tmp_path / "cache",
                                 interpret=True)
    assert outcome.result is not None, outcome
    assert "the check process failed" in outcome.result["error"]
    assert "FileNotFoundError" in outcome.result["error"]


def test_a_triton_cache_that_does_not_exist_yet_is_made_writable(tmp_path):
    """The env names its episode's cache before Triton has made it; a rule needs an existing path
    (on the H200 the first compilation failed with EACCES until the cache was made first)."""
    cache = tmp_path / "episode" / "triton-cache"
    c = sandbox.confinement_for(str(tmp_path), cache, str(tmp_path), str(tmp_path), "solution", interpret=False)
    assert cache.is_dir() and str(cache) in c.write and c.processes and c.memory_bytes is None
    check = sandbox.confinement_for(str(tmp_path), cache, str(tmp_path), str(tmp_path / "out"), "check", True)
    assert str(tmp_path / "out") in check.read and str(tmp_path / "out") not in check.write


def test_a_missing_layer_is_said_at_start(monkeypatch):
    """Where the kernel has no Landlock, the first evaluator warns, once per process."""
    import d2k_env.evaluator as evaluator
    monkeypatch.setattr(sandbox, "landlock_abi", lambda: 0)
    monkeypatch.setattr(evaluator, "_absent_said", False)
    assert any(layer.startswith("Landlock (") for layer in sandbox.absent_layers())
    with pytest.warns(RuntimeWarning, match="Landlock"):
        Evaluator(load_task("fused_add_rmsnorm"), "interpreter").close()


@pytest.mark.skipif(not landlock_abi(), reason="this kernel has no Landlock")
def test_a_process_confining_itself_before_exec_keeps_the_domain_across_exec(tmp_path):
    """confine.py as a program (how a worker under a launcher such as the GPU memory checker gets
    its Landlock domain): the program it execs may write its write roots and nothing else."""
    import subprocess
    import sys

    import d2k_env.evaluator.confine as confine

    allowed, outside = tmp_path / "scratch", tmp_path / "outside"
    allowed.mkdir()
    outside.mkdir()
    spec = confine.Confinement(list(sandbox.SYSTEM_READ_ROOTS), [str(allowed)], ["/dev/null"], None, None, 0, True)
    script = f"echo in > {allowed}/a; echo out > {outside}/b"
    fd = spec.landlock_memfd()  # the rules travel in a memory file, never in argv
    try:
        done = subprocess.run([sys.executable, "-I", "-S", confine.__file__, str(fd), "/bin/sh", "-c", script],
                              capture_output=True, text=True, timeout=60, pass_fds=(fd,))
    finally:
        os.close(fd)
    assert (allowed / "a").read_text() == "in\n"
    assert not (outside / "b").exists() and "Permission denied" in done.stderr, done.stderr


@pytest.mark.skipif(not landlock_abi(), reason="this kernel has no Landlock")
def test_a_read_root_holding_the_references_is_stepped_around_by_landlock_without_namespaces(tmp_path):
    """Installed from a wheel, the shipped references lie inside the package and site-packages, both
    read roots of a worker. Where no mount namespace can cover them, those roots become list-only
    rules plus read rules on every other entry, computed in the worker's own process from the
    roots and the hidden paths (the memory file holds only those), so that Python can still list
    and import the package while no reference can be read; with 3000 entries beside it too."""
    import subprocess
    import sys

    import d2k_env.evaluator.confine as confine

    site = tmp_path / "site"
    (site / "d2k_env" / "builtin" / "references").mkdir(parents=True)
    (site / "d2k_env" / "builtin" / "tasks").mkdir()
    (site / "d2k_env" / "builtin" / "references" / "op.py").write_text("expert kernel\n")
    (site / "d2k_env" / "builtin" / "tasks" / "op.py").write_text("spec\n")
    (site / "torch").mkdir()
    (site / "torch" / "lib.py").write_text("library\n")
    for i in range(3000):
        (site / f"dist-{i:04d}").mkdir()
    hidden = [str(site / "d2k_env" / "builtin" / "references")]
    read, listed = confine.step_around([*sandbox.SYSTEM_READ_ROOTS, str(site)], hidden)
    assert str(site) in listed and str(site) not in read
    spec = confine.Confinement([*sandbox.SYSTEM_READ_ROOTS, str(site)], [], ["/dev/null"], None, None, 0, True,
                               hidden=hidden)
    assert len(spec.to_json()) < 2000
    b = site / "d2k_env" / "builtin"
    script = f"cat {site}/torch/lib.py {b}/tasks/op.py; ls {b}/references; cat {b}/references/op.py"
    fd = spec.landlock_memfd()
    try:
        done = subprocess.run([sys.executable, "-I", "-S", confine.__file__, str(fd), "/bin/sh", "-c", script],
                              capture_output=True, text=True, timeout=60, pass_fds=(fd,))
    finally:
        os.close(fd)
    assert done.stdout.splitlines() == ["library", "spec", "op.py"], done
    assert "expert kernel" not in done.stdout and "Permission denied" in done.stderr, done.stderr


def test_a_workers_task_snapshot_holds_no_reference(tmp_path):
    from d2k_env.evaluator import snapshot_task

    task = load_task("fused_add_rmsnorm")
    root = snapshot_task(task, tmp_path / "run")
    held = sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file())
    assert held == ["baselines/fused_add_rmsnorm.py", "tasks/fused_add_rmsnorm.py"], held
