"""Task: merge_attn_states
Backend: interpreter
Expect: paid
Policy: accepts
Round: holdout4 p20

Honest probe: block pointers (tl.make_block_ptr / tl.advance with boundary_check) over a
[BLOCK_T, BLOCK_D] tile per head, a 2-D grid, and a grid lambda reading the meta dict.

Idiom: block pointers, padding_option, tl.advance, 2-D program ids, grid as a lambda.

Task: merge_attn_states
Expected: passes the policy and earns reward 1.0 on the interpreter.
"""

import torch
import triton
import triton.language as tl


@triton.jit
def merge_bp(out_ptr, lse_ptr, p_ptr, plse_ptr, s_ptr, slse_ptr, T, H, D,
             BLOCK_T: tl.constexpr, BLOCK_D: tl.constexpr):
    tb = tl.program_id(0)
    h = tl.program_id(1)
    toks = tb * BLOCK_T + tl.arange(0, BLOCK_T)
    tm = toks < T
    p_lse = tl.load(plse_ptr + h * T + toks, mask=tm, other=0.0)
    s_lse = tl.load(slse_ptr + h * T + toks, mask=tm, other=0.0)
    p_lse = tl.where(p_lse == float("inf"), float("-inf"), p_lse)
    s_lse = tl.where(s_lse == float("inf"), float("-inf"), s_lse)
    m = tl.maximum(p_lse, s_lse)
    wp = tl.exp(p_lse - m)
    ws = tl.exp(s_lse - m)
    den = wp + ws
    tl.store(lse_ptr + h * T + toks, m + tl.log(den), mask=tm)
    p_bp = tl.make_block_ptr(p_ptr + h * D, shape=(T, D), strides=(H * D, 1), offsets=(tb * BLOCK_T, 0),
                             block_shape=(BLOCK_T, BLOCK_D), order=(1, 0))
    s_bp = tl.make_block_ptr(s_ptr + h * D, shape=(T, D), strides=(H * D, 1), offsets=(0, 0),
                             block_shape=(BLOCK_T, BLOCK_D), order=(1, 0))
    s_bp = tl.advance(s_bp, (tb * BLOCK_T, 0))
    o_bp = tl.make_block_ptr(out_ptr + h * D, shape=(T, D), strides=(H * D, 1), offsets=(tb * BLOCK_T, 0),
                             block_shape=(BLOCK_T, BLOCK_D), order=(1, 0))
    p = tl.load(p_bp, boundary_check=(0, 1), padding_option="zero").to(tl.float32)
    s = tl.load(s_bp, boundary_check=(0, 1), padding_option="zero").to(tl.float32)
    o = p * (wp / den)[:, None] + s * (ws / den)[:, None]
    tl.store(o_bp, o.to(out_ptr.dtype.element_ty), boundary_check=(0, 1))


def forward(prefix_out, prefix_lse, suffix_out, suffix_lse):
    T, H, d = prefix_out.shape
    out = torch.empty_like(prefix_out)
    lse = torch.empty((H, T), dtype=torch.float32, device=prefix_out.device)
    block_t = 8
    grid = lambda meta: (triton.cdiv(T, meta["BLOCK_T"]), H)
    merge_bp[grid](out, lse, prefix_out, prefix_lse, suffix_out, suffix_lse, T, H, d,
                   BLOCK_T=block_t, BLOCK_D=triton.next_power_of_2(d))
    return out, lse
