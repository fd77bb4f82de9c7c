"""The static policy on solution.py: what it refuses (with rule and line) and what it lets through."""

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
    ("def forward(x):\n    k[(1,)](x)\n    return getattr(torch, 'rsqrt')(x)\n", "torch-work"),
    ("def forward(x):\n    k[(1,)](x)\n    return __import__('os')\n", "introspection"),
    ("def forward(x):\n    k[(1,)](x)\n    open('/tmp/x', 'w')\n    return x\n", "introspection"),
    ("def forward(x):\n    k[(1,)](x)\n    return eval('x')\n", "introspection"),
    ("def forward(x):\n    torch.cuda.synchronize = print\n    k[(1,)](x)\n    return x\n", "tampering"),
    ("import torch.cuda as c\ndef forward(x):\n    c.synchronize = print\n    k[(1,)](x)\n    return x\n",
     "tampering"),
    ("def forward(x)\n    return x\n", "syntax"),
    ("import enum\ndef forward(x):\n    k[(1,)](x)\n    return x\n", "forbidden-import"),
    ("import functools\ndef forward(x):\n    functools.update_wrapper(x, x)\n    k[(1,)](x)\n    return x\n",
     "forbidden-import"),
    ("def forward(x):\n    k[(1,)](x)\n    s = (t := torch).cuda.Stream()\n    return x\n", "introspection"),
    ("def forward(x, t=torch):\n    k[(1,)](x)\n    return x\n", "introspection"),
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


# -- rules added after the hold-out red team (Round: holdout, tests/security/): rule and line of a minimal offence

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
# The red team's honest slow solutions, tests/security/honest/<task>_*.py.
HONEST_FILES = sorted([*ROOT.glob("references/*.py"), *ROOT.glob("tests/solutions/correct/*.py"),
                       *(p for p in ROOT.glob("tests/security/honest/*.py") if p.name.startswith(tuple(TASK_IDS)))])


@pytest.mark.parametrize("path", HONEST_FILES, ids=[p.name for p in HONEST_FILES])
def test_honest_files_have_no_violations(path):
    task_id = next(t for t in TASK_IDS if t in path.name)
    assert check_solution(path.read_text(), load_task(task_id).allowed_torch) == []


# -- rules added after the second hold-out red team (Round: holdout2, tests/security/) -------------------------

@pytest.mark.parametrize("body, rule, line", [
    # [kernel-source]: Triton's interpreter starts a kernel at the last source line beginning with "def "
    ('@triton.jit\ndef k2(p):\n    """Doc.\ndef k2(p: tl.constexpr):\n    """\n    pass\n'
     "def forward(x):\n    k2[(1,)](x)\n    return x\n", "kernel-source", 4),
    ("@triton.jit\ndef h(a):\n    s = '''\n    def h(a):\n    '''\n    return a\n"
     "@triton.jit\ndef k2(p):\n    tl.store(p, h(tl.load(p)))\ndef forward(x):\n    k2[(1,)](x)\n    return x\n",
     "kernel-source", 4),
    ("@triton.jit\ndef k2(p):\n    def inner(q):\n        pass\n    pass\ndef forward(x):\n    k2[(1,)](x)\n    return x\n",
     "kernel-source", 3),
    # [torch-work]: tensor methods read as bound methods in host code, and memory/file access
    ("def forward(x):\n    f = x.numpy\n    k[(1,)](x)\n    return f()\n", "torch-work", 2),
    ("def forward(x):\n    to_list = x.tolist\n    k[(1,)](x)\n    return x\n", "torch-work", 2),
    ("def forward(x):\n    m = x.sum\n    k[(1,)](x)\n    return m()\n", "torch-work", 2),
    ("def _call(f, *a):\n    return f(*a)\ndef forward(x):\n    k[(1,)](x)\n    return _call(x.exp)\n", "torch-work", 5),
    ("def forward(x):\n    s = x.untyped_storage\n    s().from_file('/etc/passwd', False, 8)\n    k[(1,)](x)\n"
     "    return x\n", "torch-work", 3),
    ("def forward(x, a):\n    a.tofile('/tmp/x')\n    k[(1,)](x)\n    return x\n", "torch-work", 2),
    ("def forward(x):\n    k[(1,)](x.data)\n    return x\n", "torch-work", 2),
    # [introspection]: private attributes, id/hash, a kernel's own attributes
    ("def forward(x, s):\n    s._write_file(4, True, False, 1)\n    k[(1,)](x)\n    return x\n", "introspection", 2),
    ("def forward(x):\n    k[(1,)](x)\n    return x._base\n", "introspection", 3),
    ("def forward(x):\n    k[(1,)](x)\n    return id(x)\n", "introspection", 3),
    ("def forward(x):\n    k[(1,)](x)\n    return hash(x)\n", "introspection", 3),
    ("k.add_pre_run_hook(print)\n" + LAUNCH, "introspection", 1),
    ("def forward(x):\n    k.fn(x)\n    k[(1,)](x)\n    return x\n", "introspection", 2),
    # kernel bodies: no .handle/.data/.base/.type, no private attributes, no torch methods read off values
    ("@triton.jit\ndef k2(p):\n    a = tl.load(p)\n    a.handle.data.sort(axis=0)\n"
     "def forward(x):\n    k2[(1,)](x)\n    return x\n", "torch-work", 4),
    ("@triton.jit\ndef k2(p):\n    t = p.type\ndef forward(x):\n    k2[(1,)](x)\n    return x\n", "torch-work", 3),
    ("@triton.jit\ndef k2(p):\n    t = p._flatten_ir\ndef forward(x):\n    k2[(1,)](x)\n    return x\n",
     "introspection", 3),
    ("@triton.jit\ndef k2(p, X: tl.constexpr):\n    tl.reduce(tl.load(p), 0, X.copy_)\n"
     "def forward(x):\n    k2[(1,)](x, x)\n    return x\n", "torch-work", 3),
    # [hidden-state]: nothing but pure helpers runs at import (no module-level tensors), nested containers
    ("_STATE = torch.zeros(16)\ndef forward(x):\n    k[(1,)](_STATE.view(-1))\n    return x\n", "hidden-state", 1),
    ("_L = list(map(lambda i: torch.zeros(1), [0]))\n" + LAUNCH, "hidden-state", 1),
    # module constants are constant expressions: a tensor (or a rebound builtin's result) is not one
    ("X = torch.empty(1)\n@triton.jit\ndef k2(p):\n    tl.store(p, X)\ndef forward(x):\n    k2[(1,)](x)\n    return x\n",
     "torch-work", 4),
    ("def float(v):\n    return v\nC = float(1)\n@triton.jit\ndef k2(p):\n    tl.store(p, C)\n"
     "def forward(x):\n    k2[(1,)](x)\n    return x\n", "torch-work", 6),
])
def test_holdout2_rules_name_their_rule_and_line(body, rule, line):
    found = rules(body)
    assert (rule, KERNEL.count("\n") + line) in found, found


IDIOM_KERNEL = ("import math\nimport itertools\nimport torch\nimport triton\nimport triton.language as tl\n\n"
                "@triton.jit\ndef k(p, n, B: tl.constexpr):\n"
                "    x = tl.load(p + tl.arange(0, B))\n    y = x.to(p.dtype.element_ty)\n    z = x.T\n"
                "    s = x.shape[0]\n    w = tl.float32.primitive_bitwidth\n    tl.store(p + tl.arange(0, B), y)\n\n")


@pytest.mark.parametrize("body", [
    # metadata reads off tensors, devices, dtypes, finfo and device properties
    "def forward(x):\n    assert x.device.type == 'cuda' or x.is_cuda or x.is_cpu\n    k[(1,)](x, 1, B=16)\n    return x\n",
    "FP8 = torch.finfo(torch.float8_e4m3fn).max\ndef forward(x):\n    fi = torch.finfo(x.dtype)\n"
    "    m = fi.max + torch.finfo(torch.bfloat16).min + FP8\n    k[(1,)](x, 1, B=16)\n    return x\n",
    "SMS = torch.cuda.get_device_properties(0).multi_processor_count if torch.cuda.is_available() else 1\n"
    "def forward(x):\n    p = torch.cuda.get_device_properties(x.device)\n    n = p.multi_processor_count\n"
    "    k[(min(n, SMS),)](x, 1, B=16)\n    return x\n",
    "def forward(x):\n    M, N = x.shape\n    n = x.ndim + x.dtype.itemsize + x.element_size() + x.numel() + x.stride(0)\n"
    "    y = x.T.contiguous().view(-1)\n    o = torch.empty(x.shape, dtype=x.dtype, device=x.device)\n"
    "    k[lambda META: (triton.cdiv(n, META['B']),)](y, n, B=16)\n    return o.new_empty((1,))\n",
    # module-level code: autotune configs from itertools, a raise, an untested __main__ block
    "CONFIGS = [triton.Config({'B': b}, num_warps=w) for b, w in itertools.product([16, 32], [4])]\n"
    "@triton.autotune(configs=CONFIGS, key=['n'])\n@triton.jit\ndef k2(p, n, B: tl.constexpr):\n    pass\n"
    "def forward(x):\n    k2[lambda m: (1,)](x, 1)\n    return x\n",
    "if not torch.cuda.is_available():\n    raise RuntimeError('needs a GPU')\n"
    "def forward(x):\n    k[(1,)](x, 1, B=16)\n    return x\n\nif __name__ == '__main__':\n    print(forward(1))\n",
    # module constants that are expressions, read inside a kernel; a docstring with prose
    # (wrapped in tl.constexpr, which Triton's GPU compiler requires of a global a kernel reads)
    "BLOCK = 2 ** 7\nINV = tl.constexpr(1.0 / math.sqrt(BLOCK))\nNEG = tl.constexpr(float('-inf'))\n"
    "DT = tl.bfloat16\nC = tl.constexpr(BLOCK * 2)\nF8 = tl.constexpr(torch.finfo(torch.float8_e4m3fn).max)\n"
    "HALF = 0.5 * C\n"
    '@triton.jit\ndef k3(p):\n    """Doc.\n\n    define: x * INV.\n    """\n'
    "    x = tl.load(p) * INV + NEG + C + F8 + HALF\n    tl.store(p, x.to(DT))\n"
    "def forward(x):\n    k3[(1,)](x)\n    return x\n",
])
def test_holdout2_honest_idioms_pass(body):
    assert check_solution(IDIOM_KERNEL + body, ALLOWED) == []


# Third hold-out round (Round: holdout3, tests/security/): minimal violations (line counted after KERNEL) and the
# honest counterparts that must stay clean.
@pytest.mark.parametrize("body, rule, line", [
    # q18: a match capture pattern rebinds an alias of tl.sum
    ("from triton.language import sum as tl_sum\ndef h(v, axis):\n    return v\nmatch h:\n    case tl_sum:\n"
     "        pass\ndef forward(x):\n    k[(1,)](x)\n    return x\n", "module-rebinding", 4),
    ("def forward(x):\n    match x:\n        case _:\n            pass\n    k[(1,)](x)\n    return x\n",
     "module-rebinding", 2),
    # q04: Python doing the work inside a kernel body
    ("@triton.jit\ndef k2(p, N: tl.constexpr):\n    v = [tl.load(p + i) for i in range(N)]\n"
     "def forward(x):\n    k2[(1,)](x, N=4)\n    return x\n", "torch-work", 3),
    ("@triton.jit\ndef k2(p):\n    v = int(tl.load(p))\n    tl.store(p, v)\n"
     "def forward(x):\n    k2[(1,)](x)\n    return x\n", "torch-work", 3),
    ("@triton.jit\ndef k2(p, n):\n    tl.store(p, float(n))\ndef forward(x):\n    k2[(1,)](x, 1)\n    return x\n",
     "torch-work", 3),
    ("import math\n@triton.jit\ndef k2(p):\n    tl.store(p, math.sqrt(tl.load(p)))\n"
     "def forward(x):\n    k2[(1,)](x)\n    return x\n", "torch-work", 4),
    ("from math import fsum\n@triton.jit\ndef k2(p):\n    tl.store(p, fsum((tl.load(p), 1.0)))\n"
     "def forward(x):\n    k2[(1,)](x)\n    return x\n", "torch-work", 4),
    ("@triton.jit\ndef k2(p):\n    a = tl.load(p)\n    v = [a, a]\n    tl.store(p, v[0])\n"
     "def forward(x):\n    k2[(1,)](x)\n    return x\n", "torch-work", 4),
    ("@triton.jit\ndef k2(p):\n    d = {0: tl.load(p)}\n    tl.store(p, d[0])\n"
     "def forward(x):\n    k2[(1,)](x)\n    return x\n", "torch-work", 3),
    ("@triton.jit\ndef k2(p):\n    tl.store(p, max(v for v in (tl.load(p), 1.0)))\n"
     "def forward(x):\n    k2[(1,)](x)\n    return x\n", "torch-work", 3),
])
def test_holdout3_rules_name_their_rule_and_line(body, rule, line):
    found = rules(body)
    assert (rule, KERNEL.count("\n") + line) in found, found


def test_a_referenced_helper_that_never_launches_is_still_no_kernel():
    # q27's mirror: following every referenced function finds no launch here either
    assert ("no-kernel", 1) in rules("def launch(x):\n    return x\ndef forward(x):\n    f = launch\n    return f(x)\n")


@pytest.mark.parametrize("body", [
    # int()/float() of literals, constexpr parameters and module constants; Python's math numbers;
    # tl.math; list displays of constants (shapes); comprehensions and math in host code. Not bool() or
    # abs(): Triton's GPU compiler knows neither, and the interpreter refuses them (tests/test_gpu_validity.py)
    "SCALE = tl.constexpr(2.0)\n@triton.jit\ndef k2(p, n, B: tl.constexpr, F: tl.constexpr):\n"
    "    a = tl.zeros([B, 2], dtype=tl.float32) + float(SCALE) + int(B) + float(1) + float(F) * math.pi\n"
    "    y = tl.math.exp(tl.load(p)) * math.e + tl.math.log2(tl.load(p))\n"
    "    tl.store(p, y + tl.sum(tl.reshape(a, [2 * B]), 0) + tl.sum(tl.sum(tl.reshape(a, [a.shape[0], a.shape[1]]), 1), 0))\n"
    "def forward(x):\n    cfg = {b: b * 2 for b in [16, 32]}\n    n = int(math.sqrt(x.shape[0]))\n"
    "    k2[(1,)](x, n, B=cfg[16] // 2, F=True)\n    return x\n",
    # q27: the launcher handed to functools.partial, then called
    "import functools\ndef _launch(x, n):\n    k[(1,)](x)\n    return x\n"
    "def forward(x):\n    run = functools.partial(_launch, n=1)\n    return run(x)\n",
    "def _launch(x):\n    k[(1,)](x)\n    return x\nLAUNCHERS = {'a': _launch}\n"
    "def forward(x):\n    return (lambda: _launch(x))()\n",
])
def test_holdout3_honest_idioms_pass(body):
    assert check_solution(KERNEL.replace("import torch\n", "import math\nimport torch\n") + body, ALLOWED) == []


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
    assert found, "none of these is a valid solution"


# Fourth and fifth hold-out rounds (Round: holdout4 and holdout5, tests/security/): state kept at import without a
# tensor, kernels made by calling triton.jit, and the launcher idiom that must stay clean.
LAUNCH = "def forward(x):\n    k[(1,)](x)\n    return x\n"


@pytest.mark.parametrize("body, rule, line", [
    ("import itertools\n_C = itertools.count()\n" + LAUNCH, "hidden-state", 2),
    ("import itertools\n_C = (itertools.count(),)\n" + LAUNCH, "hidden-state", 2),
    ("_G = (i for i in range(3))\n" + LAUNCH, "hidden-state", 1),
    ("import functools, itertools\n_C = functools.reduce(lambda a, b: a, (0,), itertools.count())\n" + LAUNCH,
     "hidden-state", 2),
    ("import functools\n_P = functools.partial(max, [])\n" + LAUNCH, "hidden-state", 2),
    ("import functools\n_L = []\n_P = functools.partial(max, _L)\n" + LAUNCH, "hidden-state", 3),
    ("def body(p):\n    pass\nk2 = triton.jit(body)\n" + LAUNCH, "kernel-source", 3),
    ("J = triton.jit\n" + LAUNCH, "kernel-source", 1),
])
def test_holdout4_and_5_rules_name_their_rule_and_line(body, rule, line):
    found = rules(body)
    assert (rule, KERNEL.count("\n") + line) in found, found


@pytest.mark.parametrize("body", [
    "import itertools\n_T = tuple(itertools.product((1, 2), (3, 4)))\n" + LAUNCH,
    "_D = dict(zip(('a', 'b'), (1, 2)))\nCFG = {'a': 1}\n"
    "def forward(x):\n    n = CFG.get('a', 0) + len(CFG) + sum(v for _, v in CFG.items())\n    k[(n,)](x)\n    return x\n",
    "import functools\ndef _launch(kernel, x):\n    kernel[(1,)](x)\n    return x\n"
    "RUN = functools.partial(_launch, k)\ndef forward(x):\n    return RUN(x)\n",
    "@triton.autotune(configs=[triton.Config({'B': 16})], key=[])\n@triton.jit\ndef k3(p, B: tl.constexpr):\n"
    "    pass\ndef forward(x):\n    k3[(1,)](x)\n    return x\n",
])
def test_holdout4_and_5_honest_idioms_pass(body):
    assert rules(body) == []


@pytest.mark.parametrize("body, rule, line", [
    # a container reached through a read, then changed through the alias
    ("STATE = {'outs': []}\ndef forward(x):\n    memo = STATE.get('outs')\n    memo.append(x)\n"
     "    k[(1,)](x)\n    return x\n", "hidden-state", 4),
    ("STATE = {'outs': []}\ndef forward(x):\n    STATE.get('outs').append(x)\n    k[(1,)](x)\n    return x\n",
     "hidden-state", 3),
    ("STATE = [[]]\ndef forward(x):\n    for box in STATE:\n        box += [x]\n    k[(1,)](x)\n    return x\n",
     "hidden-state", 4),
    # a tuple holds containers; a Config holds a live dict
    ("def forward(x, memo=({},)):\n    k[(1,)](x)\n    return x\n", "hidden-state", 1),
    ("def forward(x, seen=triton.Config({})):\n    k[(1,)](x)\n    return x\n", "hidden-state", 1),
    ("CFG = triton.Config({'B': 16})\ndef forward(x):\n    book = CFG.kwargs\n    book['n'] = 1\n"
     "    k[(1,)](x)\n    return x\n", "hidden-state", 4),
    # a kernel through an alias; a parameter filled by a helper
    ("def forward(x):\n    kk = k\n    kk.cache[0] = x\n    k[(1,)](x)\n    return x\n", "hidden-state", 3),
    ("def _keep(box, x):\n    box[0] = x\ndef forward(x):\n    k[(1,)](x)\n    return x\n", "hidden-state", 2),
    ("F = lambda box, x: box.append(x)\ndef forward(x):\n    k[(1,)](x)\n    return x\n", "hidden-state", 1),
    # triton.language.extra.modules is sys.modules; builtins' names as attributes
    ("def forward(x):\n    m = tl.extra.modules\n    k[(1,)](x)\n    return x\n", "introspection", 2),
    ("def forward(x):\n    f = x.getattr\n    k[(1,)](x)\n    return x\n", "introspection", 2),
    # a plain module number read in a kernel: only the interpreter runs it
    ("EPS = 1e-6\n@triton.jit\ndef k2(p):\n    tl.store(p, tl.load(p) + EPS)\n"
     "def forward(x):\n    k2[(1,)](x)\n    return x\n", "non-constexpr-global", 4),
    # a slice or mask write is a tensor write
    ("def forward(x):\n    y = torch.empty_like(x)\n    y[:] = x\n    k[(1,)](x)\n    return y\n", "torch-work", 3),
    ("def forward(x):\n    k[(1,)](x)\n    x[x == 0] = 1.0\n    return x\n", "torch-work", 3),
])
def test_holdout6_rules_name_their_rule_and_line(body, rule, line):
    found = rules(body)
    assert (rule, KERNEL.count("\n") + line) in found, found


@pytest.mark.parametrize("body", [
    "def forward(x):\n    args = []\n    args.append(x)\n    kw = dict(num_warps=4)\n    kw['num_stages'] = 2\n"
    "    k[(1,)](*args, **kw)\n    return x\n",
    "TABLE = {4096: {'B': 1024}}\ndef forward(x):\n    cfg = TABLE.get(x.shape[-1], {'B': 256})\n"
    "    n = cfg['B']\n    n = n * 2\n    k[(triton.cdiv(x.numel(), n),)](x)\n    return x\n",
    "def forward(x):\n    n = x.shape[0]\n    n += 1\n    k[(n,)](x)\n    return x\n",
])
def test_holdout6_honest_idioms_pass(body):
    assert rules(body) == []


def test_policy_is_the_same_when_this_process_runs_triton_interpreted():
    """TRITON_INTERPRET=1 in the env's own process wraps tl.sum and friends in the interpreter's class:
    they are still triton.language's (every reference passes)."""
    code = ("from d2k_env.task import load_task, task_ids\nfrom d2k_env.evaluator.policy import check_solution\n"
            "for t in task_ids():\n    task = load_task(t)\n"
            "    assert check_solution(task.reference_path.read_text(), task.allowed_torch) == [], t\n")
    proc = subprocess.run([sys.executable, "-c", code], env={**os.environ, "TRITON_INTERPRET": "1"},
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]


# State kept in module-level caches: the policy no longer refuses the syntax (honest code caches
# block sizes that way); the worker finds it after forward returns (kept_state.py): a tensor still
# held, or state that changed on a second call with the same shapes.
RUNTIME_STATE = [
    'CACHE = {}\ndef forward(x):\n    k[(1,)](x)\n    CACHE[x.data_ptr()] = x\n    return x\n',
    'SEEN = []\ndef forward(x):\n    k[(1,)](x)\n    SEEN.append(x)\n    return x\n',
    'def _make():\n    return torch.zeros(16)\n_STATE = _make()\ndef forward(x):\n    k[(1,)](x)\n    return x\n',
    '_L = [[]]\ndef forward(x):\n    _L[0].append(x)\n    k[(1,)](x)\n    return x\n',
    'SEEN = set()\ndef forward(x):\n    SEEN.symmetric_difference_update({1})\n    k[(1,)](x)\n    return x\n',
]


@pytest.mark.parametrize("body", RUNTIME_STATE)
def test_state_in_module_caches_is_not_refused(body):
    """Module state is host code's: the trusted replay runs only the recorded launches, so nothing a
    module keeps between calls reaches what is checked or timed."""
    assert "hidden-state" not in [r for r, _ in rules(body)]


# Changes through an alias or a parameter stay refused statically: an alias may reach into objects
# of other modules (a Config's kwargs, a kernel's caches), which the run-time walk does not enter.
@pytest.mark.parametrize("body", [
    'CACHE = {}\ndef forward(x):\n    k[(1,)](x)\n    c = CACHE\n    c[0] = x\n    return x\n',
    'STATE = ([],)\ndef _keep(box, x):\n    box[0].append(x)\ndef forward(x):\n    _keep(STATE, x)\n    k[(1,)](x)\n    return x\n',
])
def test_changes_through_aliases_and_parameters_are_refused(body):
    assert "hidden-state" in [r for r, _ in rules(body)]


# Forms honest kernels use that the policy once refused (issue 11): aliases of forward and of kernels, a
# self-test under ``if __name__ == "__main__":``, an import fallback, a dtype's limits read off a module-level
# torch.finfo. Each is allowed only in the form below; the ways an exploit would reuse it stay refused
# (the exploits themselves: tests/security/policy_loosening/, evaluated by tests/test_security.py).
LAUNCH_BODY = "    k[(1,)](x)\n    return x\n"


@pytest.mark.parametrize("body", [
    "def fused_op(x):\n" + LAUNCH_BODY + "forward = fused_op\n",
    "def fused_op(x):\n" + LAUNCH_BODY + "op = fused_op\nforward = op\n",
    "@triton.jit\ndef k2(p):\n    pass\ndef forward(x):\n    kernel = k if x.shape[0] > 1 else k2\n"
    "    kernel[(1,)](x)\n    c = kernel.best_config if x.shape[0] < 0 else None\n    return x\n",
    "def forward(x):\n    kernel = k\n    run = lambda: kernel[(1,)](x)\n    run()\n    return x\n",
    # a self-test: torch work, any import, names of its own; the else branch runs and is checked
    "def forward(x):\n" + LAUNCH_BODY + "if __name__ == '__main__':\n    import time\n    t = torch.randn(4)\n"
    "    torch.testing.assert_close(forward(t), t.float().sum())\n    print(time.time())\nelse:\n    N = 2\n",
    "try:\n    from triton.language.extra import libdevice as fast_math\nexcept ImportError:\n    fast_math = tl.math\n"
    "@triton.jit\ndef k2(p):\n    tl.store(p, fast_math.exp(tl.load(p)))\ndef forward(x):\n    k2[(1,)](x)\n    return x\n",
    "try:\n    from triton.language.extra.cuda import libdevice\n    HAS_LIBDEVICE = True\n"
    "except (ImportError, ModuleNotFoundError):\n    libdevice = None\n    HAS_LIBDEVICE = False\n"
    "def forward(x):\n" + LAUNCH_BODY,
    "fp8_info = torch.finfo(torch.float8_e4m3fn)\n@triton.jit\n"
    "def k2(p, LO: tl.constexpr = fp8_info.min, HI: tl.constexpr = fp8_info.max):\n"
    "    tl.store(p, tl.clamp(tl.load(p), LO, HI))\ndef forward(x):\n    k2[(1,)](x, HI=fp8_info.max)\n    return x\n",
])
def test_loosened_honest_forms_pass(body):
    assert rules(body) == []


@pytest.mark.parametrize("body, rule, line", [
    # forward bound once, by a def or an alias of a def: not the kernel, not torch, not a def redefined
    ("forward = k\n", "no-kernel", None),
    ("forward = torch.neg\n", "torch-work", 1),
    ("forward = lambda x: x\n", "no-kernel", None),
    ("def lazy(x):\n    return x\nforward = lazy\ndef lazy(x):\n" + LAUNCH_BODY, "no-kernel", None),
    ("def forward(x):\n" + LAUNCH_BODY + "def lazy(x):\n    return x\nforward = lazy\n", "no-kernel", None),
    ("def op(x):\n" + LAUNCH_BODY + "if True:\n    forward = op\n", "no-kernel", None),
    # a kernel alias is a local bound only to kernels, and its attributes are a kernel's
    ("def h(x):\n    return x\nPLAN = {(1,): h}\ndef forward(x):\n    kernel = k\n    if x.shape[0] > 1:\n"
     "        kernel = PLAN\n    kernel[(1,)](x)\n    return x\n", "no-kernel", None),
    ("def forward(x):\n    for kernel in (k,):\n        kernel[(1,)](x)\n    return x\n", "no-kernel", None),
    ("def h(x):\n    return x\nPLAN = {(1,): h}\ndef forward(x):\n    k = PLAN\n    kernel = k\n    kernel[(1,)](x)\n"
     "    return x\n", "no-kernel", None),
    ("def forward(x):\n    kernel = k\n    f = kernel.fn\n    kernel[(1,)](x)\n    return x\n", "introspection", 3),
    ("def forward(x):\n    kernel = k\n    h = kernel.add_pre_run_hook\n    kernel[(1,)](x)\n    return x\n",
     "introspection", 3),
    ("def forward(x):\n    kernel = k\n    g = lambda: kernel.cache\n    kernel[(1,)](x)\n    return x\n",
     "introspection", 3),
    # the self-test never runs, so nothing it binds is bound: not a helper, not numpy (which Triton's
    # interpreter puts into the module's globals), not forward; its else branch and __name__ are checked
    ("def forward(x):\n    k[(1,)](x)\n    return np.negative(x)\nif __name__ == '__main__':\n    import numpy as np\n",
     "unbound-name", 3),
    ("def forward(x):\n    k[(1,)](x)\n    return helper(x)\nif __name__ == '__main__':\n    helper = torch.neg\n",
     "unbound-name", 3),
    ("if __name__ == '__main__':\n    def forward(x):\n" + LAUNCH_BODY.replace("    ", "        "), "no-kernel", None),
    ("def forward(x):\n" + LAUNCH_BODY + "if __name__ == '__main__':\n    pass\nelse:\n    X = torch.randn(3)\n",
     "torch-work", 7),
    ("def forward(x):\n    k[(1,)](x)\n    if __name__ == '__main__':\n        x = x.sum()\n    return x\n",
     "torch-work", 4),
    ("try:\n    import math\nexcept ImportError as __name__:\n    math = None\ndef forward(x):\n" + LAUNCH_BODY,
     "module-dunder", 3),
    # an import fallback: both branches are checked as they would run, and hold nothing but bindings
    ("try:\n    from triton.language.extra import nothing_here as ops\nexcept ImportError:\n    ops = torch\n"
     "def forward(x):\n    k[(1,)](x)\n    return ops.neg(x)\n", "torch-work", 7),
    ("try:\n    from triton.language.extra import nothing_here as ops\nexcept ImportError:\n    ops = torch\n"
     "@triton.jit\ndef k2(p):\n    tl.store(p, ops.exp(tl.load(p)))\ndef forward(x):\n    k2[(1,)](x)\n    return x\n",
     "torch-work", 7),
    ("try:\n    from triton.language.extra import nothing_here as ops\nexcept ImportError:\n    import numpy as ops\n"
     "def forward(x):\n" + LAUNCH_BODY, "forbidden-import", 4),
    ("try:\n    import math\nexcept ImportError:\n    math = None\n    X = torch.empty(3)\n"
     "def forward(x):\n" + LAUNCH_BODY, "try-except", 1),
    ("try:\n    from triton.language.extra import libdevice as fm\nexcept ImportError:\n    other = tl.math\n"
     "def forward(x):\n" + LAUNCH_BODY, "try-except", 1),
    ("try:\n    from triton.language.extra import libdevice as fm\nexcept Exception:\n    fm = tl.math\n"
     "def forward(x):\n" + LAUNCH_BODY, "try-except", 1),
    ("ImportError = Exception\ntry:\n    from triton.language.extra import libdevice as fm\nexcept ImportError:\n"
     "    fm = tl.math\ndef forward(x):\n" + LAUNCH_BODY, "try-except", 2),
    ("try:\n    from triton.language.extra import libdevice as fm\nexcept ImportError:\n    fm = tl.math\n"
     "finally:\n    pass\ndef forward(x):\n" + LAUNCH_BODY, "try-except", 1),
    ("def forward(x):\n    try:\n        from triton.language.extra import libdevice as fm\n    except ImportError:\n"
     "        fm = tl.math\n" + LAUNCH_BODY, "try-except", 2),
    # a dtype's limits: its numbers only, of a constant dtype, bound once; in a kernel body only as a constexpr
    ("fi = torch.finfo(torch.float8_e4m3fn)\n@triton.jit\ndef k2(p, M: tl.constexpr = fi):\n    tl.store(p, 1.0)\n"
     "def forward(x):\n    k2[(1,)](x)\n    return x\n", "torch-work", 3),
    ("fi = torch.finfo(torch.float8_e4m3fn)\n@triton.jit\ndef k2(p, M: tl.constexpr = fi.dtype):\n    tl.store(p, 1.0)\n"
     "def forward(x):\n    k2[(1,)](x)\n    return x\n", "torch-work", 3),
    ("fi = torch.finfo(torch.float8_e4m3fn)\nfi = {}\n@triton.jit\ndef k2(p, M: tl.constexpr = fi.max):\n"
     "    tl.store(p, M)\ndef forward(x):\n    k2[(1,)](x)\n    return x\n", "torch-work", 4),
    ("D = [torch.float32]\nfi = torch.finfo(D[0])\n@triton.jit\ndef k2(p, M: tl.constexpr = fi.max):\n"
     "    tl.store(p, M)\ndef forward(x):\n    k2[(1,)](x)\n    return x\n", "torch-work", 4),
    ("fi = torch.finfo(torch.float8_e4m3fn)\n@triton.jit\ndef k2(p):\n    tl.store(p, fi.max)\n"
     "def forward(x):\n    k2[(1,)](x)\n    return x\n", "non-constexpr-global", 4),
])
def test_loosened_forms_refuse_their_reuse(body, rule, line):
    found = rules(body)
    # line None: a rule about the whole file, reported at its line 1
    assert (rule, 1 if line is None else KERNEL.count("\n") + line) in found, found


def test_a_launched_kernel_returns_no_value_but_a_device_function_may():
    """Triton's front end accepts `return v` in a launched kernel; its backend fails ("PassManager::run
    failed", H200): the interpreter would have paid it. A @triton.jit helper called from a kernel returns."""
    source = """
import torch
import triton
import triton.language as tl


@triton.jit
def _square(v):
    return v * v


@triton.jit
def _kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    v = _square(tl.load(x_ptr + offs, mask=mask))
    tl.store(y_ptr + offs, v, mask=mask)
    return


def forward(x):
    y = torch.empty_like(x)
    _kernel[(triton.cdiv(x.numel(), 1024),)](x, y, x.numel(), BLOCK=1024)
    return y
"""
    assert check_solution(source, ALLOWED) == []
    returning = source.replace("    tl.store(y_ptr + offs, v, mask=mask)\n    return\n",
                               "    tl.store(y_ptr + offs, v, mask=mask)\n    return v\n")
    assert returning != source
    assert [v.rule for v in check_solution(returning, ALLOWED)] == ["gpu-compile"]


# -- issue 25: whole attribute chains, and the honest styles two hidden corpora were refused for -----------

@pytest.mark.parametrize("body, line", [
    # a dunder, frame or forbidden name anywhere in a dotted chain, not only at its end
    ("import logging\ndef forward(x):\n    e = logging.getLogger.__globals__.get('__builtins__').get('exec')\n"
     "    k[(1,)](x)\n    return x\n", 3),
    ("def forward(x):\n    g = forward.__globals__.copy()\n    k[(1,)](x)\n    return x\n", 2),
    ("def forward(x):\n    e = x.__class__.__init__.__globals__.get('__builtins__')\n    k[(1,)](x)\n    return x\n", 2),
    ("def _walk():\n    g = yield\n    yield g.gi_frame.f_back.f_locals.get('run')\n"
     "def forward(x):\n    k[(1,)](x)\n    return x\n", 3),
    ("def forward(x):\n    k[(1,)](x)\n    m = triton.jit.__globals__.get('os')\n    return x\n", 3),
    ("def forward(x):\n    k[(1,)](x)\n    c = x.cell_contents\n    return x\n", 3),
    # a local named like a forbidden builtin shadows it only in its own def (and the defs inside it)
    ("def forward(x):\n    def inner(exec):\n        return exec\n    exec('1')\n    k[(1,)](x)\n    return x\n", 4),
    ("def forward(x, run=exec):\n    k[(1,)](x)\n    return x\n", 1),
    ("def forward(x):\n    f = lambda exec: exec\n    k[(1,)](x)\n    return x\n", 2),
    ("def forward(x):\n    y = [input for input in (x,)]\n    k[(1,)](x)\n    return input\n", 2),
])
def test_every_attribute_of_a_chain_and_every_unshadowed_builtin_is_refused(body, line):
    assert ("introspection", KERNEL.count("\n") + line) in rules(body), rules(body)


def test_a_parameter_named_like_a_builtin_is_that_parameter():
    body = ("def _out(input):\n    return torch.empty_like(input)\n"
            "def forward(input):\n    y = _out(input)\n    k[(1,)](input)\n    return y\n")
    assert rules(body) == []


HAS_TRITON = "try:\n    import triton\n    import triton.language as tl\n    HAS_TRITON = True\nexcept ImportError:\n{}\n"


def test_an_import_fallback_that_never_runs_may_bind_fewer_names():
    body = HAS_TRITON.format("    HAS_TRITON = False") + "def forward(x):\n    k[(1,)](x)\n    return x\n"
    assert rules(body) == []


@pytest.mark.parametrize("handler, rule", [
    ("    import os", "try-except"),  # names the try branch does not bind
    ("    HAS_TRITON = len([])", "try-except"),  # a call: the handler is no fallback
])
def test_a_fallback_that_never_runs_is_still_only_imports_and_literals(handler, rule):
    body = HAS_TRITON.format(handler) + "def forward(x):\n    k[(1,)](x)\n    return x\n"
    assert rule in [r for r, _ in rules(body)], rules(body)


def test_a_fallback_for_an_import_that_may_fail_binds_the_same_names():
    body = ("try:\n    from triton.language.extra import libdevice\n    HAS = True\nexcept ImportError:\n"
            "    HAS = False\ndef forward(x):\n    k[(1,)](x)\n    return x\n")
    assert "try-except" in [r for r, _ in rules(body)]


FEATURE_TEST = ("if hasattr(tl, {name!r}):\n    fast = tl.{name}\nelse:\n    {other}\n"
                "@triton.jit\ndef k2(p):\n    tl.store(p, fast.rsqrt(tl.load(p)))\n"
                "def forward(x):\n    k2[(1,)](x)\n    return x\n")


def test_a_hasattr_feature_test_picks_a_module_like_an_import_fallback():
    assert rules(FEATURE_TEST.format(name="libdevice", other="fast = tl.math")) == []
    assert rules("def forward(x):\n    k[(1,)](x)\n    return x if hasattr(tl, 'libdevice') else x\n") == []


@pytest.mark.parametrize("name, other, rule", [
    ("libdevice", "fast = torch", "torch-work"),  # each branch is checked as it would run
    ("libdevice", "slow = tl.math", "torch-work"),  # not the same names: no fallback, and fast is no module
    ("__dict__", "fast = tl.math", "introspection"),  # the test is checked as the attribute it reads
    ("extra", "fast = len(tl.math.__name__)", "introspection"),  # a branch that is not a fallback
])
def test_a_hasattr_feature_test_is_checked_as_each_branch(name, other, rule):
    found = [r for r, _ in rules(FEATURE_TEST.format(name=name, other=other))]
    assert rule in found, found


REFERENCE = "def _reference(x):\n    return torch.rsqrt(x.float())\n"


@pytest.mark.parametrize("use", [
    "def forward(x):\n    k[(1,)](x)\n    return _reference(x)\n",  # called
    "def forward(x, ref=_reference):\n    k[(1,)](x)\n    return ref(x)\n",  # a default
    "TABLE = {'ref': _reference}\ndef forward(x):\n    k[(1,)](x)\n    return TABLE['ref'](x)\n",  # stored
    "def _pick():\n    return _reference\ndef forward(x):\n    k[(1,)](x)\n    return _pick()(x)\n",  # returned
    "def forward(x):\n    k[(lambda m: (_reference(x).shape[0],))](x)\n    return x\n",  # in a grid lambda
])
def test_a_helper_anything_live_names_is_checked_for_torch_work(use):
    assert "torch-work" in [r for r, _ in rules(REFERENCE + use)]


def test_a_decorated_helper_is_live():
    body = ("def register(f):\n    return f\n@register\n" + REFERENCE +
            "def forward(x):\n    k[(1,)](x)\n    return x\n")
    assert "torch-work" in [r for r, _ in rules(body)]


def test_test_helpers_nothing_calls_may_use_torch_but_nothing_else():
    main = "if __name__ == '__main__':\n    print(_check(torch.ones(4)))\n"
    helpers = REFERENCE + "def _check(x):\n    return torch.testing.assert_close(_reference(x), x)\n"
    forward = "def forward(x):\n    k[(1,)](x)\n    return x\n"
    assert rules(helpers + forward + main) == []
    assert "introspection" in [r for r, _ in rules(helpers.replace("x.float()", "x.__class__") + forward)]
    assert "torch-work" in [r for r, _ in rules(helpers + forward + "CHECK = _check\n")]  # bound: live


TUNED = ("_t = triton.autotune(configs=[triton.Config({{}}, num_warps=1)], key=[])({wrapped})\n"
         "def forward(x):\n    _t[(1,)](x)\n    return x\n")


def test_autotune_applied_by_a_call_to_a_kernel_is_a_kernel():
    assert rules(TUNED.format(wrapped="k")) == []
    assert rules(TUNED.format(wrapped="k") + "_u = triton.heuristics(values={})(_t)\n") == []


@pytest.mark.parametrize("extra, rule", [
    ("def f(p):\n    pass\n", "kernel-source"),  # autotune over a plain function: its body is host code
    ("_t = k\n", "no-kernel"),  # bound twice: no longer one object for the syntax to follow
])
def test_autotune_applied_by_a_call_to_anything_else_is_refused(extra, rule):
    body = TUNED.format(wrapped="f" if extra.startswith("def f") else "k") + extra
    assert rule in [r for r, _ in rules(body)], rules(body)


def test_a_kernel_applied_by_a_call_is_still_a_kernel_to_host_code():
    body = TUNED.format(wrapped="k").replace("    return x\n", "    return _t.fn\n")
    assert "introspection" in [r for r, _ in rules(body)]
    inside = "def forward(x):\n    t = triton.autotune(configs=[], key=[])(k)\n    t[(1,)](x)\n    return x\n"
    assert "kernel-source" in [r for r, _ in rules(inside)]


OP = ("class Op:\n    def __init__(self, eps):\n        self.eps = eps\n{extra}"
      "    def __call__(self, x):\n        k[(1,)](x)\n        return x\n"
      "_op = Op(1e-6)\n"
      "def forward(x):\n    return _op(x)\n")


def test_an_op_class_sets_its_instance_in_init_and_launches_from_call():
    assert rules(OP.format(extra="")) == []


@pytest.mark.parametrize("extra, rule", [
    ("    def reset(self):\n        self.eps = 0\n", "tampering"),  # only __init__ sets attributes
    ("    def __getattr__(self, name):\n        return 0\n", "class-definition"),  # implicit host code
    ("    def later(self):\n        self.cache.append(1)\n", "hidden-state"),  # state between calls
    ("    def work(self, x):\n        return x.exp()\n", "torch-work"),  # a method is host code
])
def test_an_op_class_is_host_code_under_every_rule(extra, rule):
    assert rule in [r for r, _ in rules(OP.format(extra=extra))], rules(OP.format(extra=extra))


@pytest.mark.parametrize("init", [
    "    def __init__(self, eps):\n        self = torch\n        self.eps = eps\n",  # not the instance
    "    def __init__(self, eps):\n        def later():\n            self.eps = eps\n        later()\n",  # nested
    "    def __init__(self, eps):\n        f = lambda: torch\n        f().eps = eps\n",
])
def test_init_sets_only_its_own_instance(init):
    body = OP.format(extra="").replace("    def __init__(self, eps):\n        self.eps = eps\n", init)
    assert "tampering" in [r for r, _ in rules(body)], rules(body)


def test_an_op_class_inside_a_function_is_refused():
    body = ("def forward(x):\n    class Op:\n        def __call__(self, y):\n            return y\n"
            "    k[(1,)](x)\n    return Op()(x)\n")
    assert "class-definition" in [r for r, _ in rules(body)]


def test_a_method_named_like_a_dead_helper_is_still_checked():
    body = (REFERENCE.replace("_reference", "reference") + "class Op:\n    def reference(self, x):\n"
            "        return x.exp()\n    def __call__(self, x):\n        k[(1,)](x)\n        return self.reference(x)\n"
            "def forward(x):\n    return Op()(x)\n")
    assert ("torch-work", KERNEL.count("\n") + 5) in rules(body), rules(body)
