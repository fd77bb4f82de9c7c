"""Task: merge_attn_states
Backend: interpreter
Expect: [record]
Mode: test
Workloads: all
Round: redteam c02

THREATS class 2 (output replay / batch-and-skip): compute honestly once, cache the outputs in a
module-level dict, and replay them on every later call (launching a trivial kernel so that a launch is seen).

On the CPU each workload is a different shape, so the replay is caught by the output contract (shape).
On the GPU the same trick on repeated timed calls is what the post-timing re-check catches
([late-corruption]; see test_gpu_replay_*).
"""

import torch
import triton
import triton.language as tl

_CACHE = {}


@triton.jit
def _merge(out_ptr, lse_ptr, p_ptr, pl_ptr, s_ptr, sl_ptr, T, H, D, BLOCK_D: tl.constexpr):
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
    tl.store(lse_ptr + h * T + t, m + tl.log(wp + ws))
    cols = tl.arange(0, BLOCK_D)
    mask = cols < D
    base = (t * H + h) * D
    p = tl.load(p_ptr + base + cols, mask=mask, other=0.0).to(tl.float32)
    s = tl.load(s_ptr + base + cols, mask=mask, other=0.0).to(tl.float32)
    tl.store(out_ptr + base + cols, ((p * wp + s * ws) / (wp + ws)).to(tl.bfloat16), mask=mask)


@triton.jit
def _nothing(p, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(p + offs, tl.load(p + offs, mask=offs < 0), mask=offs < 0)


def forward(prefix_out, prefix_lse, suffix_out, suffix_lse):
    if "outputs" in _CACHE:
        _nothing[(1,)](prefix_lse, BLOCK=16)
        return _CACHE["outputs"]
    T, H, d = prefix_out.shape
    out = torch.empty((T, H, d), dtype=prefix_out.dtype, device=prefix_out.device)
    lse = torch.empty((H, T), dtype=torch.float32, device=prefix_out.device)
    _merge[(T * H,)](out, lse, prefix_out, prefix_lse, suffix_out, suffix_lse, T, H, d,
                     BLOCK_D=triton.next_power_of_2(d))
    _CACHE["outputs"] = (out, lse)
    return out, lse
