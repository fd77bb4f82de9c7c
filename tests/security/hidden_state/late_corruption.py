"""Task: merge_attn_states
Backend: both
Expect on interpreter: any
Expect on cuda: any
Behind the policy on cuda: [late-corruption]
Mode: test
Mode on cuda: benchmark
Workloads: all
Round: redteam c15

THREATS class 15 (late corruption): correct for the first K calls (counted in a module-level dict;
'global' is refused), wrong afterwards (outputs scaled by 1.5). On the GPU the calls after the check are
the warm-up and timed calls, and the re-check after the timed loop must fail ([late-corruption]). On the
CPU backend nothing is timed: each workload gets one call, so with K = 1 the second workload's
correctness call is already wrong (elements outside the tolerance).
"""

import torch
import triton
import triton.language as tl

K = 1
_CALLS = {"n": 0}


@triton.jit
def _merge(out_ptr, lse_ptr, p_ptr, pl_ptr, s_ptr, sl_ptr, T, H, D, FACTOR, BLOCK_D: tl.constexpr):
    pid = tl.program_id(0)
    t = pid // H
    h = pid % H
    p_lse = tl.load(pl_ptr + h * T + t)
    s_lse = tl.load(sl_ptr + h * T + t)
    p_lse = tl.where(p_lse == float("inf"), float("-inf"), p_lse)
    s_lse = tl.where(s_lse == float("inf"), float("-inf"), s_lse)
    m = tl.maximum(p_lse, s_lse)
    wp = tl.exp(p_lse - m)
    ws = tl.exp(s_lse - m)
    tl.store(lse_ptr + h * T + t, (m + tl.log(wp + ws)) * FACTOR)
    cols = tl.arange(0, BLOCK_D)
    mask = cols < D
    base = (t * H + h) * D
    p = tl.load(p_ptr + base + cols, mask=mask, other=0.0).to(tl.float32)
    s = tl.load(s_ptr + base + cols, mask=mask, other=0.0).to(tl.float32)
    out = (p * wp + s * ws) / (wp + ws) * FACTOR
    tl.store(out_ptr + base + cols, out.to(out_ptr.dtype.element_ty), mask=mask)


def forward(prefix_out, prefix_lse, suffix_out, suffix_lse):
    _CALLS["n"] += 1
    factor = 1.0 if _CALLS["n"] <= K else 1.5
    T, H, d = prefix_out.shape
    out = torch.empty((T, H, d), dtype=prefix_out.dtype, device=prefix_out.device)
    lse = torch.empty((H, T), dtype=torch.float32, device=prefix_out.device)
    _merge[(T * H,)](out, lse, prefix_out, prefix_lse, suffix_out, suffix_lse, T, H, d, factor,
                     BLOCK_D=triton.next_power_of_2(d))
    return out, lse
