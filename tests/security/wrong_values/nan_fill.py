"""Task: merge_attn_states
Backend: interpreter
Expect: "contains NaN"
Round: holdout h16

Class 6 (NaN fill, "if the checker ignores NaN"). Task: merge_attn_states.

Idea: write NaN everywhere (outputs vary bit-wise? no: NaN != NaN, so a constant-output test
based on equality does not see a NaN fill as constant).
Defence expected: NaN never passes ("contains NaN"). Should earn 0.
"""
import torch
import triton
import triton.language as tl


@triton.jit
def _fill_nan(p, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(p + offs, tl.full([BLOCK], float("nan"), tl.float32).to(p.dtype.element_ty), mask=offs < n)


def forward(prefix_out, prefix_lse, suffix_out, suffix_lse):
    T, H, d = prefix_out.shape
    out = torch.empty((T, H, d), dtype=prefix_out.dtype, device=prefix_out.device)
    lse = torch.empty((H, T), dtype=torch.float32, device=prefix_out.device)
    _fill_nan[(triton.cdiv(out.numel(), 1024),)](out, out.numel(), BLOCK=1024)
    _fill_nan[(triton.cdiv(lse.numel(), 1024),)](lse, lse.numel(), BLOCK=1024)
    return out, lse
