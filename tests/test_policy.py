"""The static policy on solution.py: what it refuses (with rule and line) and what it lets through."""

from pathlib import Path

import pytest

from conftest import TASK_IDS
from d2k_env.evaluator.policy import check_solution
from d2k_env.task import load_task

KERNEL = "import torch\nimport triton\nimport triton.language as tl\n\n@triton.jit\ndef k(p):\n    pass\n"
ALLOWED = frozenset({"empty", "empty_like"})


def rules(body: str) -> list[tuple[str, int]]:
    return [(v.rule, v.line) for v in check_solution(KERNEL + body, ALLOWED)]


@pytest.mark.parametrize("task_id", TASK_IDS)
def test_references_pass(task_id):
    task = load_task(task_id)
    assert check_solution(task.reference_path.read_text(), task.allowed_torch) == []


@pytest.mark.parametrize("body, rule", [
    ("def forward(x):\n    k[(1,)](x)\n    return x.float() + 1\n", "torch-work"),
    ("import torch.nn.functional as F\ndef forward(x):\n    k[(1,)](x)\n    return F.silu(x)\n", "torch-work"),
    ("from torch import rsqrt\ndef forward(x):\n    k[(1,)](x)\n    return rsqrt(x)\n", "torch-work"),
    ("def forward(x):\n    k[(1,)](x)\n    f = torch.rsqrt\n    return f(x)\n", "torch-work"),
    ("def forward(x):\n    k[(1,)](x)\n    return torch.empty_like(x).zero_()\n", "torch-work"),
    ("def forward(x):\n    k[(1,)](x)\n    return x.sum().item()\n", "torch-work"),
    ("def forward(x):\n    s = torch.cuda.Stream()\n    k[(1,)](x)\n    return x\n", "torch-work"),
    ("def forward(x):\n    g = torch.cuda.CUDAGraph()\n    k[(1,)](x)\n    return x\n", "torch-work"),
    ("def forward(x):\n    try:\n        k[(1,)](x)\n    except Exception:\n        pass\n    return x\n", "try-except"),
    ("def forward(x):\n    return torch.empty_like(x)\n", "no-kernel"),
    ("def forward(x):\n    if False:\n        pass\n    return x\n", "no-kernel"),
    ("import gc\ndef forward(x):\n    k[(1,)](x)\n    return x\n", "forbidden-import"),
    ("import baseline\ndef forward(x):\n    k[(1,)](x)\n    return x\n", "forbidden-import"),
    ("from d2k_env import task\ndef forward(x):\n    k[(1,)](x)\n    return x\n", "forbidden-import"),
    ("import threading\ndef forward(x):\n    k[(1,)](x)\n    return x\n", "forbidden-import"),
    ("from torch import *\ndef forward(x):\n    k[(1,)](x)\n    return x\n", "forbidden-import"),
    ("from . import sibling\ndef forward(x):\n    k[(1,)](x)\n    return x\n", "forbidden-import"),
    ("def forward(x):\n    k[(1,)](x)\n    return x.__class__\n", "introspection"),
    ("def forward(x):\n    k[(1,)](x)\n    return getattr(torch, 'rsqrt')(x)\n", "introspection"),
    ("def forward(x):\n    k[(1,)](x)\n    return __import__('os')\n", "introspection"),
    ("def forward(x):\n    k[(1,)](x)\n    open('/tmp/x', 'w')\n    return x\n", "introspection"),
    ("def forward(x):\n    k[(1,)](x)\n    return eval('x')\n", "introspection"),
    ("def forward(x):\n    torch.cuda.synchronize = print\n    k[(1,)](x)\n    return x\n", "tampering"),
    ("import torch.cuda as c\ndef forward(x):\n    c.synchronize = print\n    k[(1,)](x)\n    return x\n",
     "tampering"),
    ("def forward(x)\n    return x\n", "syntax"),
    ("import enum\ndef forward(x):\n    k[(1,)](x)\n    return x\n", "forbidden-import"),
    ("from functools import lru_cache\ndef forward(x):\n    k[(1,)](x)\n    return x\n", "forbidden-import"),
    ("import functools\ndef forward(x):\n    functools.update_wrapper(x, x)\n    k[(1,)](x)\n    return x\n",
     "forbidden-import"),
    ("def forward(x):\n    k[(1,)](x)\n    s = (t := torch).cuda.Stream()\n    return x\n", "introspection"),
    ("def forward(x, t=torch):\n    k[(1,)](x)\n    return x\n", "introspection"),
    ("CACHE = {}\ndef forward(x):\n    k[(1,)](x)\n    CACHE[x.data_ptr()] = x\n    return x\n", "hidden-state"),
    ("SEEN = []\ndef forward(x):\n    k[(1,)](x)\n    SEEN.append(x)\n    return x\n", "hidden-state"),
    ("STATE = {}\n@triton.jit\ndef k2(p):\n    STATE.get(0)\ndef forward(x):\n    k2[(1,)](x)\n    return x\n",
     "torch-work"),
])
def test_violations_name_their_rule(body, rule):
    found = rules(body)
    assert rule in [r for r, _ in found], found
    assert all(line >= 1 for _, line in found)


def test_the_line_number_points_at_the_offence():
    found = rules("def forward(x):\n    k[(1,)](x)\n    y = x.exp()\n    return y\n")
    assert found == [("torch-work", KERNEL.count("\n") + 3)]


@pytest.mark.parametrize("body", [
    "def launch(x, y):\n    k[(triton.cdiv(x.numel(), 128),)](x)\n\n"
    "def forward(x):\n    y = torch.empty_like(x)\n    launch(x, y.view(-1))\n    return y\n",
    "import math\nfrom functools import partial\n\nBLOCK = 128\n\ndef grid(n, block):\n"
    "    return (math.ceil(n / block),)\n\n"
    "def forward(x):\n    k[partial(grid, block=BLOCK)(x.numel())](x.reshape(-1))\n"
    "    return torch.empty(x.shape, dtype=torch.float32, device=x.device)\n",
])
def test_honest_host_code_passes(body):
    assert rules(body) == []


def test_kernel_bodies_may_use_triton_freely_but_not_introspection():
    src = ("import torch\nimport triton\nimport triton.language as tl\n\n@triton.jit\n"
           "def k(p, n, BLOCK: tl.constexpr):\n    x = tl.load(p + tl.arange(0, BLOCK)).to(tl.float32)\n"
           "    tl.store(p + tl.arange(0, BLOCK), tl.exp(x).sum())\n\n"
           "def forward(x):\n    k[(1,)](x, x.numel(), BLOCK=16)\n    return torch.empty_like(x)\n")
    assert check_solution(src, ALLOWED) == []
    bad = src.replace("tl.exp(x).sum()", "x.__class__")
    assert [v.rule for v in check_solution(bad, ALLOWED)] == ["introspection"]


# -- rules added after the hold-out red team (tests/holdout/): rule and line of a minimal offence -------------

LAUNCH = "def forward(x):\n    k[(1,)](x)\n    return x\n"


@pytest.mark.parametrize("body, rule, line", [
    # [forbidden-import]: the names a from-import takes get the attribute checks
    ("from triton.language.core import builtins\n" + LAUNCH, "forbidden-import", 1),
    ("from triton.language.core import inspect\n" + LAUNCH, "forbidden-import", 1),
    ("from triton.runtime.jit import threading\n" + LAUNCH, "forbidden-import", 1),
    ("from triton.language import __builtins__ as B\n" + LAUNCH, "forbidden-import", 1),
    ("from math import pi as eval\n" + LAUNCH, "forbidden-import", 1),
    ("from triton.language.extra import pkgutil\n" + LAUNCH, "forbidden-import", 1),
    # [forbidden-import] / [triton-internals]: triton beyond the kernel-writing API
    ("from triton.runtime.build import compile_module_from_src\n" + LAUNCH, "forbidden-import", 1),
    ("from triton.testing import do_bench\n" + LAUNCH, "forbidden-import", 1),
    ("from triton.backends import os\n" + LAUNCH, "forbidden-import", 1),
    ("import triton.runtime.build\n" + LAUNCH, "forbidden-import", 1),
    ("from triton import knobs\n" + LAUNCH, "forbidden-import", 1),
    ("def forward(x):\n    k[(1,)](x)\n    triton.runtime.build.compile_module_from_src('', 'm')\n    return x\n",
     "triton-internals", 3),
    ("def forward(x):\n    k[(1,)](x)\n    triton.compiler.compile\n    return x\n", "triton-internals", 3),
    ("def forward(x):\n    k[(1,)](x)\n    tl.extra.pkgutil.resolve_name('os')\n    return x\n", "triton-internals", 3),
    ("def forward(x):\n    k[(1,)](x)\n    tl.core.wraps(x)\n    return x\n", "triton-internals", 3),
    ("def forward(x):\n    k[(1,)](x)\n    tl.extra.spec.loader.get_data('/etc/passwd')\n    return x\n",
     "triton-internals", 3),
    # [unbound-name]: names the file never binds (the interpreter plants np, inspect, ... at a launch)
    ("def forward(x):\n    k[(1,)](x)\n    return np.asarray(x)\n", "unbound-name", 3),
    ("def forward(x):\n    k[(1,)](x)\n    return inspect.stack()\n", "unbound-name", 3),
    ("if False:\n    np = None\n" + LAUNCH, "unbound-name", 2),
    ("def forward(x):\n    k[(1,)](x)\n    G = type('G', (tuple,), {})\n    return x\n", "introspection", 3),
    # [class-definition]
    ("def forward(x):\n    class G(tuple):\n        pass\n    k[G((1,))](x)\n    return x\n", "class-definition", 2),
    # [hidden-state]: mutable defaults, and module-level containers aliased to a local
    ("def forward(x, _cache={}):\n    k[(1,)](x)\n    _cache[0] = x\n    return x\n", "hidden-state", 1),
    ("def forward(x, seen=[]):\n    k[(1,)](x)\n    return x\n", "hidden-state", 1),
    ("def forward(x, buf=torch.empty(1)):\n    k[(1,)](x)\n    return x\n", "hidden-state", 1),
    ("CACHE = {}\ndef forward(x):\n    k[(1,)](x)\n    c = CACHE\n    c[0] = x\n    return x\n", "hidden-state", 4),
    # [module-rebinding]
    ("def _abs(tl):\n    return tl.abs()\ndef forward(x):\n    k[(1,)](x)\n    return _abs(x)\n", "module-rebinding", 1),
    ("def forward(x):\n    k[(1,)](x)\n    for triton in [x]:\n        pass\n    return x\n", "module-rebinding", 3),
    ("def forward(x):\n    k[(1,)](x)\n    torch = x\n    return x\n", "module-rebinding", 3),
    # kernels: a local decorator named jit makes no kernel; kernel bodies call Triton only
    ("def jit(f):\n    return f\n@jit\ndef w(x):\n    x.copy_(x)\n" + LAUNCH.replace("k[(1,)](x)", "k[(1,)](x)\n    w(x)"),
     "torch-work", 5),
    ("@triton.jit\ndef k2(p, X: tl.constexpr):\n    X.copy_(X)\ndef forward(x):\n    k2[(1,)](x, x)\n    return x\n",
     "torch-work", 3),
    ("@triton.jit\ndef k2(p, F: tl.constexpr):\n    F(p)\ndef forward(x):\n    k2[(1,)](x, print)\n    return x\n",
     "torch-work", 3),
    ("@triton.jit\ndef k2(p, X: tl.constexpr):\n    X += 1\ndef forward(x):\n    k2[(1,)](x, x)\n    return x\n",
     "torch-work", 3),
    ("@triton.jit\ndef k2(p, L):\n    L[0] = 1\ndef forward(x):\n    k2[(1,)](x, [x])\n    return x\n",
     "torch-work", 3),
])
def test_holdout_rules_name_their_rule_and_line(body, rule, line):
    found = rules(body)
    assert (rule, KERNEL.count("\n") + line) in found, found


def test_a_local_jit_decorator_makes_no_kernel():
    src = "import torch\n\ndef jit(f):\n    return f\n\n@jit\ndef k(p):\n    pass\n\ndef forward(x):\n    k(x)\n    return x\n"
    assert "no-kernel" in [v.rule for v in check_solution(src, ALLOWED)]


@pytest.mark.parametrize("body", [
    # the kernel-writing API, imported in every usual way
    "from triton import jit, cdiv\nfrom triton.language.extra import libdevice\n"
    "from triton.language.extra.cuda import libdevice as ld\nimport triton.language.extra.cuda.libdevice\n\n"
    "@jit\ndef k2(p, n, B: tl.constexpr):\n    x = libdevice.exp(tl.load(p + tl.arange(0, B)))\n"
    "    y = tl.maximum(ld.rsqrt(x), tl.math.rsqrt(x), propagate_nan=tl.PropagateNan.ALL)\n"
    "    tl.store(p + tl.arange(0, B), y.to(p.dtype.element_ty))\n\n"
    "def forward(x):\n    k2[(cdiv(x.numel(), 16),)](x, x.numel(), B=16)\n    return x\n",
    # autotune and heuristics around triton.jit, pointer increments, loops, helper kernels
    "@triton.jit\ndef h(a):\n    return a * 2\n\n"
    "@triton.autotune(configs=[triton.Config({'B': 16}, num_warps=4)], key=['n'])\n"
    "@triton.heuristics({'E': lambda args: args['n'] % 2 == 0})\n@triton.jit\n"
    "def k2(p, n, B: tl.constexpr, E: tl.constexpr):\n    offs = tl.arange(0, B)\n"
    "    acc = tl.zeros([B], dtype=tl.float32)\n    for i in tl.range(0, n, B):\n"
    "        acc += h(tl.load(p + i + offs, mask=i + offs < n, other=0.0)).to(tl.float32)\n"
    "    p += tl.program_id(0).to(tl.int64) * n\n    tl.store(p + offs, acc.to(p.dtype.element_ty))\n\n"
    "def forward(x):\n    if x.dim() != 1:\n        raise ValueError('1-D only')\n"
    "    k2[lambda meta: (triton.cdiv(x.numel(), meta['B']),)](x, x.numel())\n    return x\n\n"
    "if __name__ == '__main__':\n    print(forward)\n",
])
def test_honest_kernel_idioms_pass(body):
    assert rules(body) == []


ROOT = Path(__file__).resolve().parent.parent
HONEST_FILES = sorted([*ROOT.glob("references/*.py"), *ROOT.glob("tests/solutions/correct/*.py"),
                       *ROOT.glob("tests/redteam/honest*.py")])


@pytest.mark.parametrize("path", HONEST_FILES, ids=[p.name for p in HONEST_FILES])
def test_honest_files_have_no_violations(path):
    task_id = next(t for t in TASK_IDS if t in path.name)
    assert check_solution(path.read_text(), load_task(task_id).allowed_torch) == []
