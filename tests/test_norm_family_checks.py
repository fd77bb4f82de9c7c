"""Checker cases of the backward/fusion/optimizer tasks (rmsnorm_bwd, swiglu_fwd_bwd,
newton_schulz5_muon): honest orders of computation pass, lower precision or a wrong formula fails.
Computed with torch on the CPU from each task's own inputs and baseline (fixed seeds)."""

import importlib.util

import pytest
import torch
import torch.nn.functional as F

from d2k_env.task import Workload, load_task


def case(task_id, **params):
    """The task, one draw of its inputs, and its baseline's answer to them."""
    task = load_task(task_id)
    inputs = task.make_inputs(Workload("t", params), torch.Generator().manual_seed(1), torch.device("cpu"))
    spec = importlib.util.spec_from_file_location(f"{task_id}_baseline", task.baseline_path)
    baseline = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(baseline)
    expected = baseline.forward(*inputs)
    return task, inputs, expected if isinstance(expected, tuple) else (expected,)


def rmsnorm_bwd_variant(dy, x, weight, rstd, variant):
    dyf, xf, wf = dy.float(), x.float(), weight.float()
    x_hat = xf * rstd[:, None]
    if variant == "x_hat in bf16":
        x_hat = x_hat.bfloat16().float()
    g = dyf * wf
    c = (g * x_hat).sum(-1, keepdim=True) / x.shape[1]
    dx = (rstd[:, None] * (g - x_hat * c)).bfloat16()
    products = dyf * x_hat
    if variant == "rows in random order (atomics)":
        dw = torch.zeros(x.shape[1])
        for row in products[torch.randperm(x.shape[0], generator=torch.Generator().manual_seed(0))]:
            dw += row
    elif variant == "partials of 64 rows in bf16":
        dw = products.view(-1, 64, x.shape[1]).sum(1).bfloat16().float().sum(0)
    elif variant == "dW from unnormalised x":
        dw = (dyf * xf).sum(0)
    elif variant == "dx without the mean term":
        dx, dw = (rstd[:, None] * g).bfloat16(), products.sum(0)
    else:
        dw = products.sum(0)
    return dx, dw


@pytest.mark.parametrize("variant, ok", [
    ("as written", True),
    ("rows in random order (atomics)", True),
    ("x_hat in bf16", False),
    ("partials of 64 rows in bf16", False),
    ("dW from unnormalised x", False),
    ("dx without the mean term", False),
])
def test_rmsnorm_bwd_checker(variant, ok):
    task, inputs, expected = case("rmsnorm_bwd", M=2048, N=256)
    verdict = task.checker(rmsnorm_bwd_variant(*inputs, variant), expected, inputs)
    assert verdict.ok == ok, verdict.message


def swiglu_variant(a, b, dc, variant):
    if variant == "all in bf16":  # every intermediate rounded, the sigmoid's too
        s = torch.sigmoid(a.float()).bfloat16()
        silu = a * s
        return silu * b, dc * b * (s * (1 + a * (1 - s))), dc * silu
    af, bf, dcf = a.float(), b.float(), dc.float()
    s = torch.sigmoid(af)
    deriv = s if variant == "silu derivative taken as sigmoid" else s * (1 + af * (1 - s))
    return (af * s * bf).bfloat16(), (dcf * bf * deriv).bfloat16(), (dcf * af * s).bfloat16()


@pytest.mark.parametrize("variant, ok", [
    ("fp32, rounded once", True),
    ("all in bf16", False),
    ("silu derivative taken as sigmoid", False),
])
def test_swiglu_checker(variant, ok):
    task, inputs, expected = case("swiglu_fwd_bwd", M=512, I=1024)
    verdict = task.checker(swiglu_variant(*inputs, variant), expected, inputs)
    assert verdict.ok == ok, verdict.message


def newton_schulz_variant(g, variant):
    a, b, c = 3.4445, -4.7750, 2.0315
    keep = {"fp32 throughout": lambda t: t, "fp16 between steps": lambda t: t.half().float(),
            "fp8 between steps": lambda t: (t * 16).to(torch.float8_e4m3fn).float() / 16}.get(
        variant, lambda t: t.bfloat16().float())
    x = g.float()
    x = keep(x / (x.norm(dim=(-2, -1), keepdim=True) + 1e-7))
    for _ in range(4 if variant == "four steps" else 5):
        gram = keep(x @ x.mT)
        poly = keep(b * gram + c * gram @ gram)
        x = keep(a * x + poly @ x)
    return (x.bfloat16(),)


@pytest.mark.parametrize("variant, ok", [
    ("fused epilogues in bf16", True),
    ("fp32 throughout", True),
    ("fp16 between steps", True),
    ("four steps", False),
    ("fp8 between steps", False),
])
def test_newton_schulz_checker(variant, ok):
    task, inputs, expected = case("newton_schulz5_muon", batch=3, m=96, n=256)
    verdict = task.checker(newton_schulz_variant(*inputs, variant), expected, inputs)
    assert verdict.ok == ok, verdict.message
