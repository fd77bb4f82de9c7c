"""fused_linear_cross_entropy's bf16 logits do not depend on the order an honest kernel sums in.

The loss and gradients are taken from logits rounded to bf16, and in peaked rows one logit rounded
the other way moves the softmax by percents, so a logit whose fp32 sum lands near a rounding
boundary decides the verdict by the accumulation order alone. The task's inputs are fixed-point so
that every partial sum is exact in fp32 (its make_inputs says why). Here the baseline (one matmul) is
compared with an honest order of plain torch: 64-deep K steps added last to first, as a K-looped
GEMM does in the other direction. Drawn as bf16 normals, the inputs of the 32x16384x1024 shape below
round 1e-4 to 3e-4 of the logits the other way.
The baseline's products are summed in fp32 too: cuBLAS may not reduce split-K partials in bf16.
"""


import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

from d2k_env.task import _load_module, load_task

TASK = load_task("fused_linear_cross_entropy")
BASELINE = _load_module(TASK.baseline_path, "flce_baseline_rounding")
IGNORE = -100


def k_steps_reversed(h, weight, step=64):
    """h @ weight^T in fp32, one K step of ``step`` columns at a time from the last one, in bf16."""
    acc = torch.zeros(h.shape[0], weight.shape[0])
    for k in reversed(range(0, h.shape[1], step)):
        acc += h[:, k:k + step].float() @ weight[:, k:k + step].float().t()
    return acc.bfloat16()


def honest_forward(h, weight, targets):
    """The task's function with the logits of :func:`k_steps_reversed` and dz rounded to bf16 as a GEMM
    operand, as the reference computes it."""
    z = k_steps_reversed(h, weight).float()
    keep = targets != IGNORE
    n = keep.sum()
    safe = targets.clamp(min=0)
    loss = ((z.logsumexp(-1) - z.gather(1, safe[:, None])[:, 0]) * keep).sum() / n
    dz = z.softmax(-1)
    dz[torch.arange(len(targets)), safe] -= 1
    dz = (dz * keep[:, None] / n).bfloat16().float()
    return loss, (dz @ weight.float()).bfloat16(), dz.t() @ h.float()


def shapes():
    """The smoke workloads, smoke held-out draws, and the GPU shapes' hidden sizes with few tokens and
    a small vocabulary (the held-out wide-H family's extremes among them)."""
    spec = TASK.spec
    drawn = [w for seed in range(2) for w in TASK.heldout_workloads(seed, True)]
    wide = [(32, h, 1024) for h in (4096, 8192, 8200, 15440, 16384)]
    return ([pytest.param(w.params, id=w.name) for w in [*spec.smoke_workloads, *drawn]]
            + [pytest.param({"BT": bt, "H": h, "V": v}, id=f"{bt}x{h}x{v}") for bt, h, v in wide])


@pytest.mark.parametrize("w", shapes())
def test_two_honest_orders_give_the_same_logits_and_pass(w):
    h, weight, targets = TASK.make_inputs(w, torch.Generator().manual_seed(7), "cpu")
    assert torch.equal(k_steps_reversed(h, weight), (h @ weight.t()))
    inputs = (h, weight, targets)
    verdict = TASK.checker(honest_forward(*inputs), BASELINE.forward(*inputs), inputs)
    assert verdict.ok, verdict.message


class MatmulSettings(TorchDispatchMode):
    """Whether cuBLAS may reduce in bf16, as each matrix product of the call sees it."""

    def __init__(self):
        super().__init__()
        self.seen = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if func.overloadpacket in (torch.ops.aten.mm, torch.ops.aten.addmm, torch.ops.aten.bmm):
            self.seen.append(torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction)
        return func(*args, **(kwargs or {}))


def test_the_baseline_sums_its_products_in_fp32_and_restores_the_setting():
    # torch's default lets cuBLAS add split-K partials in bf16, which the task's function does not do.
    matmul = torch.backends.cuda.matmul
    assert matmul.allow_bf16_reduced_precision_reduction
    inputs = TASK.make_inputs(TASK.spec.smoke_workloads[0].params, torch.Generator().manual_seed(0), "cpu")
    with MatmulSettings() as settings:
        BASELINE.forward(*inputs)
    assert len(settings.seen) == 3 and not any(settings.seen)
    assert matmul.allow_bf16_reduced_precision_reduction
