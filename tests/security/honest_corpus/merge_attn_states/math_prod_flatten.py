"""Task: merge_attn_states
Backend: interpreter
Expect: paid
Policy: accepts
Workloads: all
Seed: 1584381787
Round: honest corpus

Idiom: math.prod over the leading dimensions to launch over flattened (token, head) rows."""

import math

import torch
import triton
import triton.language as tl


@triton.jit
def _merge_rows_kernel(out_ptr, lse_ptr, p_out_ptr, p_lse_ptr, s_out_ptr, s_lse_ptr, n_rows, T, H, D,
                       BLOCK_R: tl.constexpr, BLOCK_D: tl.constexpr):
    # Row r is (token r // H, head r % H); the [H, T] LSEs are read at h * T + t.
    rows = tl.program_id(0) * BLOCK_R + tl.arange(0, BLOCK_R)
    rm = rows < n_rows
    t = rows // H
    h = rows % H
    pl = tl.load(p_lse_ptr + h * T + t, mask=rm, other=0.0)
    sl = tl.load(s_lse_ptr + h * T + t, mask=rm, other=0.0)
    pl = tl.where(pl == float("inf"), float("-inf"), pl)
    sl = tl.where(sl == float("inf"), float("-inf"), sl)
    m = tl.maximum(pl, sl)
    wp = tl.exp(pl - m)
    ws = tl.exp(sl - m)
    tl.store(lse_ptr + h * T + t, m + tl.log(wp + ws), mask=rm)
    cols = tl.arange(0, BLOCK_D)
    mask = rm[:, None] & (cols < D)[None, :]
    offs = rows.to(tl.int64)[:, None] * D + cols[None, :]
    p = tl.load(p_out_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    s = tl.load(s_out_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    tl.store(out_ptr + offs, ((p * wp[:, None] + s * ws[:, None]) / (wp + ws)[:, None]).to(tl.bfloat16), mask=mask)


def forward(prefix_out, prefix_lse, suffix_out, suffix_lse):
    *lead, D = prefix_out.shape
    T, H = lead
    n_rows = math.prod(lead)
    out = torch.empty_like(prefix_out)
    lse = torch.empty_like(prefix_lse)
    BLOCK_R = 16
    _merge_rows_kernel[(triton.cdiv(n_rows, BLOCK_R),)](out, lse, prefix_out, prefix_lse, suffix_out, suffix_lse,
                                                        n_rows, T, H, D, BLOCK_R=BLOCK_R,
                                                        BLOCK_D=triton.next_power_of_2(D))
    return out, lse
