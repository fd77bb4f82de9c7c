"""The static policy on solution.py: what it refuses (with rule and line) and what it lets through.

Since the trust boundary moved (the solution process only records launches; a trusted replay rebuilds
the kernels from the checked text and does all checking and timing), the policy checks the text,
where kernels are defined ([kernel-source]) and that every kernel body is Triton's language
([kernel-language], kernel_language.py, the replay's own check). Host Python is free: the forms the
old policy refused in host code are accepted here, and what they could do is the boundary's to hold
(tests/test_security.py runs those exploits end to end; tests/test_replay.py has the language's cases)."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import TASK_IDS
from d2k_env.evaluator.policy import check_solution
from d2k_env.task import load_task

KERNEL = "import torch\nimport triton\nimport triton.language as tl\n\n@triton.jit\ndef k(p):\n    pass\n"
ALLOWED = frozenset({"empty", "empty_like"})
ROOT = Path(__file__).resolve().parent.parent


def rules(body: str) -> list[tuple[str, int]]:
    return [(v.rule, v.line) for v in check_solution(KERNEL + body, ALLOWED)]


@pytest.mark.parametrize("task_id", TASK_IDS)
def test_references_pass(task_id):
    task = load_task(task_id)
    assert check_solution(task.reference_path.read_text(), task.allowed_torch) == []


# The red team's honest slow solutions, tests/security/honest/<task>_*.py.
HONEST_FILES = sorted([*ROOT.glob("references/*.py"), *ROOT.glob("tests/solutions/correct/*.py"),
                       *(p for p in ROOT.glob("tests/security/honest/*.py") if p.name.startswith(tuple(TASK_IDS)))])


@pytest.mark.parametrize("path", HONEST_FILES, ids=[p.name for p in HONEST_FILES])
def test_honest_files_have_no_violations(path):
    task_id = next(t for t in TASK_IDS if t in path.name)
    assert check_solution(path.read_text(), load_task(task_id).allowed_torch) == []



LAUNCH = "def forward(x):\n    k[(1,)](x)\n    return x\n"

# The false refusals of issue 25's hidden corpora, and host Python of every kind: the policy reads none of it.
HONEST_HOST = {
    "try-import HAS_TRITON": "try:\n    import triton as _t\n    HAS_TRITON = True\nexcept ImportError:\n"
                             "    HAS_TRITON = False\n\n" + LAUNCH,
    "a wrapper class with __call__": "class Op:\n    def __init__(self):\n        self.block = 16\n\n"
                                     "    def __call__(self, x):\n        k[(1,)](x)\n        return x\n\n\n"
                                     "forward = Op()\n",
    "contextlib nullcontext": "from contextlib import nullcontext\n\n\ndef forward(x):\n    with nullcontext():\n"
                              "        k[(1,)](x)\n    return x\n",
    "unused torch test helpers": "def _reference(x):\n    return torch.nn.functional.relu(x).sum()\n\n\n" + LAUNCH,
    "autotune applied by a call": "tuned = triton.autotune([triton.Config({}, num_warps=4)], key=[])(k)\n\n\n"
                                  "def forward(x):\n    tuned[(1,)](x)\n    return x\n",
    "hasattr(tl, 'libdevice')": "if hasattr(tl, 'libdevice'):\n    libdevice = tl.libdevice\nelse:\n"
                                "    from triton.language.extra import libdevice\n\n" + LAUNCH,
    "a torch.Size grid": "def forward(x):\n    k[torch.Size([1])](x)\n    return x\n",
    "reset_to_zero with several configs": "tuned = triton.autotune([triton.Config({}, num_warps=w) for w in (2, 4)], "
                                          "key=[], reset_to_zero=['p'])(k)\n\n\ndef forward(x):\n    tuned[(1,)](x)\n"
                                          "    return x\n",
    "imports, getattr, globals, try/except": "import os\nimport functools\n\n_CACHE = {}\n\n\n"
                                             "def forward(x):\n    try:\n        k[(1,)](x)\n    except RuntimeError:\n"
                                             "        raise\n    _CACHE[getattr(x, 'shape')] = os.getpid()\n    return x\n",
}


@pytest.mark.parametrize("name", sorted(HONEST_HOST))
def test_host_python_is_free(name):
    assert rules(HONEST_HOST[name]) == []


def test_a_kernel_parameter_named_input_is_that_parameter():
    body = ("@triton.jit\ndef k2(input, out, n, BLOCK: tl.constexpr):\n    offs = tl.arange(0, BLOCK)\n"
            "    tl.store(out + offs, tl.load(input + offs, mask=offs < n), mask=offs < n)\n\n" + LAUNCH)
    assert rules(body) == []


# Kernel bodies: what kernel_language refuses, named by line (the old [gpu-compile] and kernel [torch-work]).
KERNEL_ESCAPES = [
    ("@triton.jit\ndef k2(p, n):\n    for i in range(n):\n        break\n", 11),
    ("@triton.jit\ndef k2(p, n):\n    m = 0 <= n < 4\n", 10),
    ("@triton.jit\ndef k2(p, n):\n    v = torch.relu(tl.load(p))\n", 10),
    ("@triton.jit\ndef k2(p, n):\n    v = tl.load(p).handle\n", 10),
    ("@triton.jit\ndef k2(p, n):\n    v = math.sqrt(float(tl.load(p)))\n", 10),
    ("@triton.jit\ndef k2(p, n):\n    v = [int(tl.load(p + i)) for i in range(n)]\n", 10),
    ("@triton.jit\ndef k2(p, n):\n    n()\n", 10),
    ("@triton.jit\ndef k2(p, n):\n    v = tl.__dict__\n", 10),
    ("@triton.jit\ndef k2(p, n):\n    v = tl.load.__globals__['__builtins__']\n", 10),
    ("@triton.jit\ndef k2(p, n):\n    v = triton.runtime.driver\n", 10),
    ("@triton.jit\ndef k2(p, n):\n    v = SCALE * n\n", 10),
    ("@triton.jit\ndef k2(p, n):\n    v = helper(n)\n", 10),
]


@pytest.mark.parametrize("body, line", KERNEL_ESCAPES)
def test_kernel_bodies_are_triton_language(body, line):
    prelude = "import math\n\nSCALE = 2\n\n\ndef helper(v):\n    return v\n\n\n"
    found = [(v.rule, v.line + 0) for v in check_solution(KERNEL + prelude + body + LAUNCH, ALLOWED)]
    assert found and {r for r, _ in found} == {"kernel-language"}, found
    assert line + prelude.count("\n") in {n for _, n in found}, found


def test_a_language_function_imported_by_name_is_the_language_but_math_s_is_not():
    call = "@triton.jit\ndef k2(p):\n    tl.store(p, {}(tl.load(p)))\n\n\n"
    assert rules("from triton.language.extra.libdevice import rsqrt\n\n" + call.format("rsqrt") + LAUNCH) == []
    assert rules("from math import sqrt\n\n" + call.format("sqrt") + LAUNCH) == [("kernel-language", 12)]


def test_a_kernel_passed_to_triton_jit_is_checked_too():
    body = "def plain(p):\n    p.copy_(p)\n\n\nk2 = triton.jit(plain)\n\n\n" + LAUNCH
    assert rules(body) == [("kernel-language", 9)]


KERNEL_SOURCE = {
    "a jit function inside forward": ("def forward(x):\n    @triton.jit\n    def inner(p):\n        pass\n\n"
                                      "    inner[(1,)](x)\n    return x\n", 10),
    "a jit method": ("class Op:\n    @triton.jit\n    def inner(p):\n        pass\n\n\n" + LAUNCH, 10),
    "an async jit function": ("@triton.jit\nasync def k2(p):\n    pass\n\n\n" + LAUNCH, 9),
    "triton.jit of a lambda": ("k2 = triton.jit(lambda p: p)\n\n\n" + LAUNCH, 8),
    "triton.jit through an alias": ("jit = triton.jit\n\n\ndef forward(x):\n    def inner(p):\n        pass\n\n"
                                    "    jit(inner)[(1,)](x)\n    return x\n", 15),
    "a def line in a docstring": ('@triton.jit\ndef k2(p):\n    """Like\ndef k2(p):\n    tl.store(p, 1)\n    """\n'
                                  "    pass\n\n\n" + LAUNCH, 11),
    "a def line in a decorator's string": ('@triton.jit(do_not_specialize=["""\ndef k2(p):\n"""])\ndef k2(p):\n'
                                           "    pass\n\n\n" + LAUNCH, 9),
}


@pytest.mark.parametrize("name", sorted(KERNEL_SOURCE))
def test_kernels_are_top_level_defs_whose_text_triton_reads_back(name):
    body, line = KERNEL_SOURCE[name]
    found = rules(body)
    assert ("kernel-source", line) in found and {r for r, _ in found} == {"kernel-source"}, found


@pytest.mark.parametrize("forward", ["def forward(x):\n    return x\n", "forward = k\n", "class forward:\n    pass\n",
                                     "from math import prod as forward\n", "if True:\n    forward = len\n"])
def test_forward_is_bound_at_module_level(forward):
    assert rules(forward) == []
    assert rules(forward.replace("forward", "backward")) == [("no-kernel", 1)]


def test_text_and_syntax_are_refused_before_anything_else():
    assert [r for r, _ in rules("x = 1\x0c\n" + LAUNCH)] == ["source-text"]
    assert rules("def forward(x)\n    return x\n") == [("syntax", 8)]


def test_oversized_sources_are_refused_before_parsing():
    import time
    big = KERNEL + "def forward(x):\n    k[(1,)](x)\n    return x\n" + "\n".join(
        f"def h{i}(a):\n    return a + a" for i in range(30_000))
    assert len(big) > 256 * 1024
    t = time.monotonic()
    found = check_solution(big, ALLOWED)
    assert time.monotonic() - t < 0.5
    assert [v.rule for v in found] == ["source-size"], found
    small = KERNEL + "def forward(x):\n    k[(1,)](x)\n    return x\n" + "#" * (200 * 1024) + "\n"
    assert check_solution(small, ALLOWED) == []


# Odd inputs never make the checker raise: it reports (fails closed) instead.
STRESS_SOURCES = [
    "\x00", "def forward(x):\n    return x\x00\n", "x = " + "-" * 100_000 + "1\n", "x = " + "(" * 5000 + ")" * 5000 + "\n",
    "f = " + "lambda: " * 3000 + "0\n", "x = " + "a." * 20_000 + "b\n", "from torch import _C\n", "import triton.language.extra.cuda.libdevice\n",
    "from triton.language import *\n", "match x:\n    case {**rest}:\n        pass\n", "async def f():\n    [i async for i in g()]\n",
    "\ufeffdef forward(x):\n    return x\n", "def forward(x):\n\treturn x\n        \n", "@triton.jit\n" * 50 + "def k(p): pass\n",
    "x: int\ndef forward(*a, **k):\n    return (lambda *a, b=[]: a)(*a)\n", "\n".join(f"v{i} = {i}" for i in range(20_000)),
    "def forward(x):\n    return x.\u00e9\n", "if True:\n  x = 1\n else:\n  pass\n",
]


@pytest.mark.parametrize("source", STRESS_SOURCES, ids=range(len(STRESS_SOURCES)))
def test_checker_never_raises(source):
    found = check_solution(source, ALLOWED)
    assert isinstance(found, list) and all(hasattr(v, "rule") for v in found)


def test_policy_is_the_same_when_this_process_runs_triton_interpreted():
    """TRITON_INTERPRET=1 in the env's own process wraps tl.sum and friends in the interpreter's class:
    they are still triton.language's (every reference passes)."""
    code = ("from d2k_env.task import load_task, task_ids\nfrom d2k_env.evaluator.policy import check_solution\n"
            "for t in task_ids():\n    task = load_task(t)\n"
            "    assert check_solution(task.reference_path.read_text(), task.allowed_torch) == [], t\n")
    proc = subprocess.run([sys.executable, "-c", code], env={**os.environ, "TRITON_INTERPRET": "1"},
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
