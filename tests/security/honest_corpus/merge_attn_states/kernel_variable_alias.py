"""Task: merge_attn_states
Backend: interpreter
Expect: paid
Policy: accepts
Workloads: all
Seed: 323972216
Round: honest corpus

Idiom: the kernel chosen into a variable and launched through it (`kernel = _k; kernel[grid](...)`)."""

import torch
import triton
import triton.language as tl


@triton.jit
def _merge_one_token_kernel(out_ptr, lse_ptr, p_out_ptr, p_lse_ptr, s_out_ptr, s_lse_ptr, T, H, D,
                            BLOCK_D: tl.constexpr):
    t = tl.program_id(0)
    h = tl.program_id(1)
    pl = tl.load(p_lse_ptr + h * T + t)
    sl = tl.load(s_lse_ptr + h * T + t)
    pl = tl.where(pl == float("inf"), float("-inf"), pl)
    sl = tl.where(sl == float("inf"), float("-inf"), sl)
    m = tl.maximum(pl, sl)
    wp = tl.exp(pl - m)
    ws = tl.exp(sl - m)
    tl.store(lse_ptr + h * T + t, m + tl.log(wp + ws))
    cols = tl.arange(0, BLOCK_D)
    mask = cols < D
    base = (t.to(tl.int64) * H + h) * D
    p = tl.load(p_out_ptr + base + cols, mask=mask, other=0.0).to(tl.float32)
    s = tl.load(s_out_ptr + base + cols, mask=mask, other=0.0).to(tl.float32)
    tl.store(out_ptr + base + cols, ((p * wp + s * ws) / (wp + ws)).to(tl.bfloat16), mask=mask)


@triton.jit
def _merge_token_block_kernel(out_ptr, lse_ptr, p_out_ptr, p_lse_ptr, s_out_ptr, s_lse_ptr, T, H, D,
                              BLOCK_T: tl.constexpr, BLOCK_D: tl.constexpr):
    h = tl.program_id(1)
    toks = tl.program_id(0) * BLOCK_T + tl.arange(0, BLOCK_T)
    tm = toks < T
    pl = tl.load(p_lse_ptr + h * T + toks, mask=tm, other=0.0)
    sl = tl.load(s_lse_ptr + h * T + toks, mask=tm, other=0.0)
    pl = tl.where(pl == float("inf"), float("-inf"), pl)
    sl = tl.where(sl == float("inf"), float("-inf"), sl)
    m = tl.maximum(pl, sl)
    wp = tl.exp(pl - m)
    ws = tl.exp(sl - m)
    tl.store(lse_ptr + h * T + toks, m + tl.log(wp + ws), mask=tm)
    cols = tl.arange(0, BLOCK_D)
    mask = tm[:, None] & (cols < D)[None, :]
    offs = (toks.to(tl.int64) * H + h)[:, None] * D + cols[None, :]
    p = tl.load(p_out_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    s = tl.load(s_out_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    tl.store(out_ptr + offs, ((p * wp[:, None] + s * ws[:, None]) / (wp + ws)[:, None]).to(tl.bfloat16), mask=mask)


def forward(prefix_out, prefix_lse, suffix_out, suffix_lse):
    T, H, D = prefix_out.shape
    out = torch.empty_like(prefix_out)
    lse = torch.empty_like(prefix_lse)
    block_d = triton.next_power_of_2(D)
    if T >= 16:
        kernel = _merge_token_block_kernel
        kernel[(triton.cdiv(T, 8), H)](out, lse, prefix_out, prefix_lse, suffix_out, suffix_lse, T, H, D,
                                       BLOCK_T=8, BLOCK_D=block_d)
    else:
        kernel = _merge_one_token_kernel
        kernel[(T, H)](out, lse, prefix_out, prefix_lse, suffix_out, suffix_lse, T, H, D, BLOCK_D=block_d)
    return out, lse
