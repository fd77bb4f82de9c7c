"""What the evaluation child can and cannot see: environment, arguments, network, packages."""

import json
import subprocess
import sys
import textwrap

import pytest

from d2k_env.evaluator import Evaluator, PhaseLimits
from d2k_env.evaluator.sandbox import _limit_child, child_environment
from d2k_env.task import load_task

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
    assert "unreachable" in seen["network"].lower(), seen["network"]


def test_child_environment_is_an_allowlist(monkeypatch, tmp_path):
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "x")
    monkeypatch.setenv("TRITON_INTERPRET", "0")
    env = child_environment(str(tmp_path), tmp_path / "cache", interpret=True)
    assert "AWS_SECRET_ACCESS_KEY" not in env and env["TRITON_INTERPRET"] == "1"
    assert env["TRITON_CACHE_DIR"] == str(tmp_path / "cache") and env["CUDA_VISIBLE_DEVICES"] == ""


def test_resource_limits_bind_the_child():
    code = "import resource; print(resource.getrlimit(resource.RLIMIT_FSIZE)[0], resource.getrlimit(resource.RLIMIT_CPU)[0])"
    out = subprocess.run([sys.executable, "-c", code], preexec_fn=_limit_child, capture_output=True, text=True)
    fsize, cpu = map(int, out.stdout.split())
    assert 0 < fsize < 2**40 and 0 < cpu <= 3600
