"""Task: per_token_group_quant_fp8
Backend: interpreter
Expect: [torch-work]
Round: holdout h11

Class 3 (not writing a kernel), static rule evasion only. Task: per_token_group_quant_fp8.

Idea: the host tensor-method rule skips calls whose base resolves to an allowed module, so a
helper whose parameter is *named* `tl` (or `triton`) can call any tensor method on it:
`tl.abs()` resolves to triton.language.abs in the policy's eyes. The work runs in plain host code.
Defence expected: the static policy misses it, the runtime [torch-work] guard catches it.
Should earn 0.
"""
import torch
import triton
import triton.language as tl


@triton.jit
def _noop(p, N):
    pass


def _abs(tl):
    return tl.abs()


def _amax(tl):
    return tl.amax(dim=-1, keepdim=True)


def _clamp_min(tl):
    return tl.clamp(min=1e-10)


def _f32(tl):
    return tl.float()


def _clamp(tl):
    return tl.clamp(-448.0, 448.0)


def _fp8(tl):
    return tl.to(torch.float8_e4m3fn)


def forward(x):
    M, K = x.shape
    q0 = torch.empty((M, K), dtype=torch.float8_e4m3fn, device=x.device)
    _noop[(1,)](q0, 1)
    g = _f32(x).view(M, K // 128, 128)
    scale = _clamp_min(_amax(_abs(g))) / 448.0
    q = _fp8(_clamp(g / scale))
    return q.view(M, K), scale.view(M, K // 128)
