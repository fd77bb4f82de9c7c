"""Task: merge_attn_states
Backend: interpreter
Expect: paid
Policy: accepts
Workloads: all
Seed: 2601771570
Round: honest corpus

Idiom: warnings.warn about an unusual input (a head size that is not a power of two) before launching anyway."""

import warnings

import torch
import triton
import triton.language as tl


@triton.jit
def _merge_kernel(out_ptr, lse_ptr, p_out_ptr, p_lse_ptr, s_out_ptr, s_lse_ptr, T, H, D,
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
    inv = 1.0 / (wp + ws)
    tl.store(out_ptr + offs, (p * (wp * inv)[:, None] + s * (ws * inv)[:, None]).to(tl.bfloat16), mask=mask)


def forward(prefix_out, prefix_lse, suffix_out, suffix_lse):
    T, H, D = prefix_out.shape
    if D & (D - 1):
        warnings.warn(f"head size {D} is not a power of two: the kernel pads it to "
                      f"{triton.next_power_of_2(D)} and masks the tail", stacklevel=2)
    if T * H < 1024:
        warnings.warn(f"merge_attn_states: only {T * H} (token, head) pairs; this launch is latency-bound",
                      RuntimeWarning, stacklevel=2)
    out = torch.empty_like(prefix_out)
    lse = torch.empty_like(prefix_lse)
    BLOCK_T = 4
    _merge_kernel[(triton.cdiv(T, BLOCK_T), H)](out, lse, prefix_out, prefix_lse, suffix_out, suffix_lse, T, H, D,
                                                BLOCK_T=BLOCK_T, BLOCK_D=triton.next_power_of_2(D))
    return out, lse
