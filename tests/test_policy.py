"""The static policy on solution.py: what it refuses (with rule and line) and what it lets through."""

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
