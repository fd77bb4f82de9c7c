"""fused_linear_cross_entropy's allocation limit tells a chunked kernel from one holding the full logits.

The bytes a forward allocates are counted here by running it on meta tensors (no memory, no data)
with every kernel launch a no-op, recording the output of each allocating torch op: views are free,
every buffer counts once, as the trusted replay counts them. So the bound is checked on the GPU
workloads too, in well under a second, and the evaluator's enforcement of it is not what is tested.
"""

import random
from pathlib import Path

import pytest
import torch
import triton
from torch.utils._python_dispatch import TorchDispatchMode

from d2k_env.task import _load_module, load_task
from wrong_edits import wrong_solution

ROOT = Path(__file__).resolve().parents[1]
TASK = "fused_linear_cross_entropy"
LIGER_PORT = ROOT / "tests/security/honest_corpus/fused_linear_cross_entropy/liger_chunked_inplace_grad.py"
_ALLOCATING = {"empty", "empty_like", "empty_strided", "zeros", "zeros_like", "full", "full_like", "new_empty",
               "new_zeros"}


class _Allocations(TorchDispatchMode):
    def __init__(self):
        super().__init__()
        self.bytes = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        if func.overloadpacket.__name__ in _ALLOCATING:
            self.bytes += out.untyped_storage().nbytes()
        return out


class _NoLaunch:
    def __getitem__(self, grid):
        return lambda *args, **kwargs: None


def allocated_bytes(path, w):
    module = _load_module(path, f"flce_alloc_{path.stem}")
    for name, value in vars(module).items():
        if isinstance(value, (triton.runtime.JITFunction, triton.runtime.Autotuner, triton.runtime.Heuristics)):
            setattr(module, name, _NoLaunch())
    BT, H, V = w["BT"], w["H"], w["V"]
    inputs = (torch.empty(BT, H, dtype=torch.bfloat16, device="meta"),
              torch.empty(V, H, dtype=torch.bfloat16, device="meta"),
              torch.empty(BT, dtype=torch.int64, device="meta"))
    with _Allocations() as counted:
        module.forward(*inputs)
    return counted.bytes


def _workloads():
    spec = load_task(TASK).spec
    return [pytest.param(w, id=w.name) for w in [*spec.workloads, *spec.smoke_workloads]]


@pytest.fixture(scope="module")
def full_logits(tmp_path_factory):
    return wrong_solution("fused_linear_cross_entropy_full_logits", tmp_path_factory.mktemp("wrong"))


@pytest.mark.parametrize("w", _workloads())
def test_honest_kernels_fit_and_full_logits_do_not(w, full_logits):
    task = load_task(TASK)
    limit = task.spec.allocation_limit(w)
    assert allocated_bytes(task.reference_path, w) <= limit
    assert allocated_bytes(LIGER_PORT, w) <= limit
    full = allocated_bytes(full_logits, w)
    assert full > limit
    if w in task.spec.workloads:  # "by far": the bf16 logits alone are over four times the workspace allowed
        assert 2 * w["BT"] * w["V"] > 4 * (4 * max(w["BT"] * w["H"], w["V"]))


@pytest.mark.parametrize("seed", range(4))
def test_honest_kernels_fit_on_heldout_shapes(seed):
    task = load_task(TASK)
    for smoke in (True, False):
        for w in task.spec.heldout.draw(random.Random(seed), smoke):
            for path in (task.reference_path, LIGER_PORT):
                assert allocated_bytes(path, w) <= task.spec.allocation_limit(w), (path.name, w)
