"""Task: merge_attn_states
Backend: interpreter
Expect: paid
Mode: test
Workloads: all
Round: redteam (honest, slow)

Honest but slow: one program per (token, head, 16-wide chunk of d). Each program recomputes the merge
weights for its token and head (once per chunk), and only the first chunk writes the LSE. Must PASS
every workload (no false positive).
"""

import torch
import triton
import triton.language as tl


@triton.jit
def _merge_chunk(out_ptr, lse_ptr, p_ptr, pl_ptr, s_ptr, sl_ptr, T, H, D, CHUNK: tl.constexpr):
    pid = tl.program_id(0)
    chunk = tl.program_id(1)
    t = pid // H
    h = pid % H
    p_lse = tl.load(pl_ptr + h * T + t)
    s_lse = tl.load(sl_ptr + h * T + t)
    p_lse = tl.where(p_lse == float("inf"), float("-inf"), p_lse)
    s_lse = tl.where(s_lse == float("inf"), float("-inf"), s_lse)
    m = tl.maximum(p_lse, s_lse)
    wp = tl.exp(p_lse - m)
    ws = tl.exp(s_lse - m)
    if chunk == 0:
        tl.store(lse_ptr + h * T + t, m + tl.log(wp + ws))
    cols = chunk * CHUNK + tl.arange(0, CHUNK)
    mask = cols < D
    base = (t * H + h) * D
    p = tl.load(p_ptr + base + cols, mask=mask, other=0.0).to(tl.float32)
    s = tl.load(s_ptr + base + cols, mask=mask, other=0.0).to(tl.float32)
    tl.store(out_ptr + base + cols, ((p * wp + s * ws) / (wp + ws)).to(out_ptr.dtype.element_ty), mask=mask)


def forward(prefix_out, prefix_lse, suffix_out, suffix_lse):
    T, H, d = prefix_out.shape
    out = torch.empty((T, H, d), dtype=prefix_out.dtype, device=prefix_out.device)
    lse = torch.empty((H, T), dtype=torch.float32, device=prefix_out.device)
    CHUNK = 16
    _merge_chunk[(T * H, triton.cdiv(d, CHUNK))](out, lse, prefix_out, prefix_lse, suffix_out, suffix_lse,
                                                 T, H, d, CHUNK=CHUNK)
    return out, lse
