"""Task: merge_attn_states
Backend: interpreter
Expect: paid
Policy: accepts
Workloads: all
Seed: 2843809023
Round: honest corpus

Idiom: a stride-generic launch: token and head strides of every output and input tensor, and the LSE head strides."""

import torch
import triton
import triton.language as tl


@triton.jit
def _merge_attn_states_strided(
    out_ptr, out_lse_ptr, p_ptr, p_lse_ptr, s_ptr, s_lse_ptr,
    T, D,
    stride_out_t, stride_out_h, stride_p_t, stride_p_h, stride_s_t, stride_s_h,
    stride_olse_h, stride_olse_t, stride_plse_h, stride_plse_t, stride_slse_h, stride_slse_t,
    BLOCK_T: tl.constexpr, BLOCK_D: tl.constexpr,
):
    h = tl.program_id(1).to(tl.int64)
    toks = tl.program_id(0).to(tl.int64) * BLOCK_T + tl.arange(0, BLOCK_T)
    tm = toks < T
    pl = tl.load(p_lse_ptr + h * stride_plse_h + toks * stride_plse_t, mask=tm, other=0.0)
    sl = tl.load(s_lse_ptr + h * stride_slse_h + toks * stride_slse_t, mask=tm, other=0.0)
    pl = tl.where(pl == float("inf"), float("-inf"), pl)
    sl = tl.where(sl == float("inf"), float("-inf"), sl)
    m = tl.maximum(pl, sl)
    wp = tl.exp(pl - m)
    ws = tl.exp(sl - m)
    tl.store(out_lse_ptr + h * stride_olse_h + toks * stride_olse_t, m + tl.log(wp + ws), mask=tm)
    d = tl.arange(0, BLOCK_D)
    mask = tm[:, None] & (d < D)[None, :]
    p = tl.load(p_ptr + toks[:, None] * stride_p_t + h * stride_p_h + d[None, :], mask=mask, other=0.0)
    s = tl.load(s_ptr + toks[:, None] * stride_s_t + h * stride_s_h + d[None, :], mask=mask, other=0.0)
    out = (p.to(tl.float32) * wp[:, None] + s.to(tl.float32) * ws[:, None]) / (wp + ws)[:, None]
    tl.store(out_ptr + toks[:, None] * stride_out_t + h * stride_out_h + d[None, :],
             out.to(out_ptr.dtype.element_ty), mask=mask)


def forward(prefix_out, prefix_lse, suffix_out, suffix_lse):
    T, H, D = prefix_out.shape
    assert prefix_out.stride(-1) == 1 and suffix_out.stride(-1) == 1
    out = torch.empty((T, H, D), dtype=prefix_out.dtype, device=prefix_out.device)
    out_lse = torch.empty((H, T), dtype=prefix_lse.dtype, device=prefix_lse.device)
    BLOCK_T = 8
    _merge_attn_states_strided[(triton.cdiv(T, BLOCK_T), H)](
        out, out_lse, prefix_out, prefix_lse, suffix_out, suffix_lse,
        T, D,
        out.stride(0), out.stride(1), prefix_out.stride(0), prefix_out.stride(1),
        suffix_out.stride(0), suffix_out.stride(1),
        out_lse.stride(0), out_lse.stride(1), prefix_lse.stride(0), prefix_lse.stride(1),
        suffix_lse.stride(0), suffix_lse.stride(1),
        BLOCK_T=BLOCK_T, BLOCK_D=triton.next_power_of_2(D),
    )
    return out, out_lse
