"""The sandbox holds a compromised worker: its own mount, PID and IPC namespaces (confine's
``namespaces`` layer), tested as an escaped solution would try them (the static policy off, any
Python in the worker): IPC objects of every kind, other processes and their command lines, host
secrets, a pathname Unix socket opened outside, processes that try to outlive it. After each,
nothing it made remains on the host, and the same evaluator scores the honest reference as before.
Skipped where the machine refuses namespaces (the layer then says so in every result)."""

import ctypes
import errno
import json
import os
import secrets
import socket
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from d2k_env.evaluator import Evaluator, PhaseLimits, sandbox
from d2k_env.task import load_task

TASK = "fused_add_rmsnorm"
_libc = ctypes.CDLL(None, use_errno=True)

# Tries each escape and prints one JSON object of what it reached.
PROBE = textwrap.dedent("""
    import ctypes, json, os, socket, time
    import triton

    KEY, TOKEN, MARKER, SOCKET, STRAY = @KEY@, @TOKEN@, @MARKER@, @SOCKET@, @STRAY@
    libc = ctypes.CDLL(None, use_errno=True)
    seen = {"made": [], "reached": []}

    # IPC objects meant to outlive the evaluation: SysV shared memory, POSIX shared memory, a message queue.
    if libc.shmget(KEY, 1 << 20, 0o1000 | 0o666) >= 0:  # IPC_CREAT
        seen["made"].append("sysv shm")
    try:
        with open(f"/dev/shm/d2k-probe-{TOKEN}", "wb") as f:
            f.write(b"x" * 4096)
        seen["made"].append("posix shm")
    except OSError:
        pass
    if libc.mq_open(f"/d2k-probe-{TOKEN}".encode(), os.O_CREAT | os.O_RDWR, 0o666, None) >= 0:
        seen["made"].append("mqueue")
    # A process that would outlive the worker (where processes may be made at all).
    if STRAY:
        if os.fork() == 0:
            os.setpgid(0, 0)
            time.sleep(120)
            os._exit(0)
        seen["made"].append("a stray process")
    # Other processes: any at all in /proc, and the test's marked one's command line.
    pids = [int(p) for p in os.listdir("/proc") if p.isdigit()]
    seen["pids"] = sorted(pids)
    for pid in pids:
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                if MARKER.encode() in f.read():
                    seen["reached"].append("another process's command line")
        except OSError:
            pass
    # Host secrets and sockets.
    try:
        with open("/etc/shadow") as f:
            f.read()
        seen["reached"].append("/etc/shadow")
    except OSError:
        pass
    try:
        with socket.socket(socket.AF_UNIX) as s:
            s.connect(SOCKET)
        seen["reached"].append("a host Unix socket")
    except OSError:
        pass
    seen["pid namespace"] = os.stat("/proc/self/ns/pid").st_ino
    print("PROBE " + json.dumps(seen))

    def forward(*args):
        raise RuntimeError("probed")
""")


def _processes_in(ns_inode: int) -> list[int]:
    """The host's processes in the PID namespace whose inode is ``ns_inode``."""
    found = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                if os.stat(f"/proc/{name}/ns/pid").st_ino == ns_inode:
                    found.append(int(name))
            except OSError:
                pass
    return found


@pytest.fixture
def outside(tmp_path):
    """A marked process and a listening pathname Unix socket, both the test's, outside the sandbox."""
    marker = f"d2k-outside-{secrets.token_hex(6)}"
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)", marker])
    server = socket.socket(socket.AF_UNIX)
    path = str(tmp_path / "host.sock")
    server.bind(path)
    server.listen(4)
    try:
        yield marker, path
    finally:
        server.close()
        proc.kill()
        proc.wait()


@pytest.mark.parametrize("stray", [False, True], ids=["interpreter", "processes allowed"])
def test_an_escaped_worker_leaves_nothing_and_reaches_no_host_resource(tmp_path, monkeypatch, outside, stray):
    marker, sock = outside
    key, token = 0x0D2C0000 + secrets.randbelow(1 << 16), secrets.token_hex(6)
    source = (PROBE.replace("@KEY@", str(key)).replace("@TOKEN@", repr(token)).replace("@MARKER@", repr(marker))
              .replace("@SOCKET@", repr(sock)).replace("@STRAY@", repr(stray)))
    (tmp_path / "solution.py").write_text(source)
    monkeypatch.setattr("d2k_env.evaluator.check_solution", lambda source, allowed: [])  # the policy off
    if stray:  # as on the GPU backend, which may start processes (Triton runs ptxas)
        confinement_for = sandbox.confinement_for

        def allowing(*args):
            c = confinement_for(*args)
            c.processes = True
            return c
        monkeypatch.setattr(sandbox, "confinement_for", allowing)
    task = load_task(TASK)
    ev = Evaluator(task, "interpreter", limits=PhaseLimits(default=120))
    try:
        result = ev.evaluate(tmp_path / "solution.py", "test", ["5x200"])
        line = next((l for l in result.output.splitlines() if l.startswith("PROBE ")), None)
        assert line is not None, result.error or result.output
        if result.sandbox["namespaces"].startswith("absent") and os.environ.get(sandbox.NAMESPACES_VAR) != "0":
            pytest.skip(f"this machine gives workers no namespaces: {result.sandbox['namespaces']}")
        seen = json.loads(line[len("PROBE "):])
        assert seen["reached"] == [], seen
        assert seen["pids"] == ([1, 2] if stray else [1]), seen  # itself (and its stray) alone
        # SysV shared memory is made (inside its IPC namespace); POSIX objects are files to Landlock,
        # which refuses them outside the write roots. Whatever was made must be gone.
        assert "sysv shm" in seen["made"] and ("a stray process" in seen["made"]) == stray, seen
        # Gone with it: no process of its namespace, no IPC object on the host.
        assert _processes_in(seen["pid namespace"]) == []
        assert _libc.shmget(key, 0, 0) == -1 and ctypes.get_errno() == errno.ENOENT
        assert not Path(f"/dev/shm/d2k-probe-{token}").exists()
        assert _libc.mq_open(f"/d2k-probe-{token}".encode(), os.O_RDONLY, 0, None) == -1 \
            and ctypes.get_errno() == errno.ENOENT
        # The same evaluator scores the honest reference as before.
        honest = ev.evaluate(task.reference_path, "test", ["5x200"])
        assert honest.error is None and [w.correct for w in honest.workloads] == [True], honest
        assert honest.sandbox["namespaces"] == result.sandbox["namespaces"]
    finally:
        ev.close()


@pytest.mark.skipif(os.geteuid() != 0, reason="plays an unprivileged user by dropping root")
def test_an_unprivileged_user_gets_the_view_through_a_user_namespace():
    """Not root: the namespaces come inside a user namespace that maps the user to itself (where
    the kernel allows unprivileged ones), the references are covered all the same, and the worker
    keeps no capability of that namespace. (A child of the test drops to ``nobody`` and confines
    itself as a worker would, with read roots ``nobody`` may reach.)"""
    import shutil
    import tempfile

    from d2k_env.evaluator.confine import Confinement

    base = Path(tempfile.mkdtemp(prefix="d2k-userns-"))
    try:
        os.chmod(base, 0o755)
        site, scratch, view = base / "site", base / "scratch", base / "view"
        (site / "pkg").mkdir(parents=True)
        (site / "pkg" / "lib.py").write_text("library\n")
        (site / "pkg" / "references").mkdir()
        (site / "pkg" / "references" / "op.py").write_text("expert kernel\n")
        scratch.mkdir()
        view.mkdir()
        for p in [base, *base.rglob("*")]:
            os.chmod(p, 0o755 if p.is_dir() else 0o644)
        conf = Confinement(["/usr", "/lib", "/lib64", "/bin", "/etc", "/proc", str(site)], [str(scratch)], ["/dev/null"],
                           None, None, 0, True, hidden=[str(site / "pkg" / "references")], view=str(view))
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:  # nothing here may return into pytest
            try:
                os.close(r)
                os.setgroups([])
                os.setresgid(65534, 65534, 65534)
                os.setresuid(65534, 65534, 65534)
                _libc.prctl(4, 1, 0, 0, 0)  # PR_SET_DUMPABLE, which the change of user cleared: a user's own process
                os.chdir(scratch)
                layers = conf.apply()
                seen = {"layers": layers, "uid": os.geteuid(), "pids": sorted(int(p) for p in os.listdir("/proc") if p.isdigit())}
                seen["library"] = (site / "pkg" / "lib.py").read_text()
                try:
                    seen["reference"] = (site / "pkg" / "references" / "op.py").read_text()
                except OSError as exc:
                    seen["reference"] = type(exc).__name__
                with open("/proc/self/status") as f:
                    seen["caps"] = [l.split()[1] for l in f if l.startswith("CapEff")][0]
                os.write(w, json.dumps(seen).encode())
            except BaseException as exc:  # noqa: BLE001
                import traceback
                os.write(w, json.dumps({"error": traceback.format_exc()}).encode())
            finally:
                os._exit(0)
        os.close(w)
        with os.fdopen(r) as f:
            seen = json.loads(f.read() or "{}")
        os.waitpid(pid, 0)
        if "error" in seen or seen["layers"]["namespaces"].startswith("absent"):
            pytest.skip(f"no unprivileged user namespaces here: {seen}")
        assert seen["layers"]["namespaces"].startswith("mount, PID and IPC"), seen
        assert seen["uid"] == 65534 and seen["pids"] == [1] and seen["caps"] == "0000000000000000", seen
        assert seen["library"] == "library\n" and seen["reference"] == "PermissionError", seen
    finally:
        shutil.rmtree(base, ignore_errors=True)


@pytest.mark.skipif(not os.access("/dev/shm", os.W_OK), reason="no writable /dev/shm")
def test_workers_whose_temporary_directory_is_on_dev_shm_evaluate():
    """A TMPDIR on /dev/shm puts the workers' directories there: the view's own /dev and /dev/shm
    must not cover them (they did: every worker died at its start with FileNotFoundError). In a
    process of its own, whose fork server and temporary directories all lie there."""
    import tempfile
    from d2k_env.removal import remove_tree
    temp = tempfile.mkdtemp(prefix="d2k-test-shm-", dir="/dev/shm")
    script = textwrap.dedent(f"""
        from d2k_env.evaluator import Evaluator, PhaseLimits
        from d2k_env.task import load_task
        task = load_task({TASK!r})
        ev = Evaluator(task, "interpreter", limits=PhaseLimits(default=120))
        try:
            result = ev.evaluate(task.reference_path, "test", ["5x200"])
            print("RESULT", result.error, [w.correct for w in result.workloads], result.sandbox.get("namespaces"))
        finally:
            ev.close()
    """)
    try:
        done = subprocess.run([sys.executable, "-c", script], env={**os.environ, "TMPDIR": temp},
                              capture_output=True, text=True, timeout=300)
    finally:
        remove_tree(temp)
    line = next((l for l in done.stdout.splitlines() if l.startswith("RESULT ")), None)
    assert line is not None and line.startswith("RESULT None [True]"), done.stdout[-2000:] + done.stderr[-2000:]
