"""Task: merge_attn_states
Backend: interpreter
Expect: paid
Policy: accepts
Workloads: all
Seed: 3852879937
Round: honest corpus

Idiom: a typing.NamedTuple holding the launch parameters (tokens per program, head-dim block, warps)."""

from typing import NamedTuple

import torch
import triton
import triton.language as tl


class MergeLaunch(NamedTuple):
    block_t: int
    block_d: int
    num_warps: int


def _launch_for(T, d):
    block_d = triton.next_power_of_2(d)
    block_t = max(1, min(16, 2048 // block_d))
    return MergeLaunch(block_t, block_d, 4 if block_t * block_d >= 2048 else 2)


@triton.jit
def _merge_kernel(out_ptr, lse_ptr, p_out_ptr, p_lse_ptr, s_out_ptr, s_lse_ptr, T, H, D,
                  BLOCK_T: tl.constexpr, BLOCK_D: tl.constexpr):
    h = tl.program_id(1)
    toks = tl.program_id(0) * BLOCK_T + tl.arange(0, BLOCK_T)
    t_mask = toks < T
    p_lse = tl.load(p_lse_ptr + h * T + toks, mask=t_mask, other=0.0)
    s_lse = tl.load(s_lse_ptr + h * T + toks, mask=t_mask, other=0.0)
    p_lse = tl.where(p_lse == float("inf"), float("-inf"), p_lse)
    s_lse = tl.where(s_lse == float("inf"), float("-inf"), s_lse)
    m = tl.maximum(p_lse, s_lse)
    p_w = tl.exp(p_lse - m)
    s_w = tl.exp(s_lse - m)
    total = p_w + s_w
    tl.store(lse_ptr + h * T + toks, m + tl.log(total), mask=t_mask)
    cols = tl.arange(0, BLOCK_D)
    mask = t_mask[:, None] & (cols < D)[None, :]
    offs = (toks.to(tl.int64)[:, None] * H + h) * D + cols[None, :]
    p = tl.load(p_out_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    s = tl.load(s_out_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    out = p * (p_w / total)[:, None] + s * (s_w / total)[:, None]
    tl.store(out_ptr + offs, out.to(out_ptr.dtype.element_ty), mask=mask)


def forward(prefix_out, prefix_lse, suffix_out, suffix_lse):
    T, H, d = prefix_out.shape
    launch = _launch_for(T, d)
    out = torch.empty_like(prefix_out)
    lse = torch.empty_like(prefix_lse)
    grid = (triton.cdiv(T, launch.block_t), H)
    _merge_kernel[grid](out, lse, prefix_out, prefix_lse, suffix_out, suffix_lse, T, H, d,
                        BLOCK_T=launch.block_t, BLOCK_D=launch.block_d, num_warps=launch.num_warps)
    return out, lse
