"""Task: merge_attn_states
Backend: interpreter
Expect: paid
Policy: accepts
Workloads: all
Seed: 2124045765
Round: honest corpus

Idiom: tl.constexpr module constants (LOG2E = tl.constexpr(...), LN2) read in a kernel working in the exp2/log2 domain."""

import torch
import triton
import triton.language as tl

# Module-level numbers a kernel reads must be tl.constexpr objects (an annotation alone does not do).
LOG2E = tl.constexpr(1.4426950408889634)
LN2 = tl.constexpr(0.6931471805599453)
TOKENS_PER_PROGRAM = 8


@triton.jit
def _merge_kernel_exp2(out_ptr, lse_ptr, p_out_ptr, p_lse_ptr, s_out_ptr, s_lse_ptr, T, H, D,
                       BLOCK_T: tl.constexpr, BLOCK_D: tl.constexpr):
    h = tl.program_id(1)
    toks = tl.program_id(0) * BLOCK_T + tl.arange(0, BLOCK_T)
    tm = toks < T
    pl = tl.load(p_lse_ptr + h * T + toks, mask=tm, other=0.0)
    sl = tl.load(s_lse_ptr + h * T + toks, mask=tm, other=0.0)
    pl = tl.where(pl == float("inf"), float("-inf"), pl)
    sl = tl.where(sl == float("inf"), float("-inf"), sl)
    m = tl.maximum(pl, sl)
    wp = tl.exp2((pl - m) * LOG2E)
    ws = tl.exp2((sl - m) * LOG2E)
    total = wp + ws
    tl.store(lse_ptr + h * T + toks, m + tl.log2(total) * LN2, mask=tm)
    cols = tl.arange(0, BLOCK_D)
    mask = tm[:, None] & (cols < D)[None, :]
    offs = (toks.to(tl.int64) * H + h)[:, None] * D + cols[None, :]
    p = tl.load(p_out_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    s = tl.load(s_out_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    tl.store(out_ptr + offs, (p * (wp / total)[:, None] + s * (ws / total)[:, None]).to(tl.bfloat16), mask=mask)


def forward(prefix_out, prefix_lse, suffix_out, suffix_lse):
    T, H, D = prefix_out.shape
    out = torch.empty_like(prefix_out)
    lse = torch.empty_like(prefix_lse)
    _merge_kernel_exp2[(triton.cdiv(T, TOKENS_PER_PROGRAM), H)](out, lse, prefix_out, prefix_lse, suffix_out,
                                                                suffix_lse, T, H, D, BLOCK_T=TOKENS_PER_PROGRAM,
                                                                BLOCK_D=triton.next_power_of_2(D))
    return out, lse
