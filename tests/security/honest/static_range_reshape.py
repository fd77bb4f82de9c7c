"""Task: per_token_group_quant_fp8
Backend: interpreter
Expect: paid
Policy: accepts
Round: holdout4 p21

Honest probe: groups handled as a [GROUPS, 128] tile from tl.reshape of a flat load, an
unrolled tl.static_range loop over sub-tiles, module constants as tl.constexpr globals, and
tl.maximum with propagate_nan.

Idiom: tl.constexpr module globals read inside the kernel, tl.static_range, tl.reshape,
tl.PropagateNan, keyword launch arguments, a helper that builds the launch.

Task: per_token_group_quant_fp8
Expected: passes the policy and earns reward 1.0 on the interpreter.
"""

import torch
import triton
import triton.language as tl

GROUP: tl.constexpr = tl.constexpr(128)
FP8_MAX: tl.constexpr = tl.constexpr(448.0)
EPS: tl.constexpr = tl.constexpr(1e-10)
SUB = 2


@triton.jit
def quant_tiles(x_ptr, q_ptr, s_ptr, n_groups, SUB: tl.constexpr, GPS: tl.constexpr):
    for i in tl.static_range(SUB):
        g0 = (tl.program_id(0) * SUB + i) * GPS
        flat = g0 * GROUP + tl.arange(0, GPS * GROUP)
        fm = flat < n_groups * GROUP
        x = tl.load(x_ptr + flat, mask=fm, other=0.0).to(tl.float32)
        x2 = tl.reshape(x, (GPS, GROUP))
        amax = tl.max(tl.abs(x2), axis=1)
        scale = tl.maximum(amax, EPS, propagate_nan=tl.PropagateNan.ALL) / FP8_MAX
        q = tl.clamp(x2 / scale[:, None], -FP8_MAX, FP8_MAX)
        tl.store(q_ptr + flat, tl.reshape(q, (GPS * GROUP,)).to(q_ptr.dtype.element_ty), mask=fm)
        g = g0 + tl.arange(0, GPS)
        tl.store(s_ptr + g, scale, mask=g < n_groups)


def launch(x, q, scales, n_groups, gps):
    quant_tiles[(triton.cdiv(n_groups, SUB * gps),)](x, q, scales, n_groups, SUB=SUB, GPS=gps)


def forward(x):
    M, K = x.shape
    n_groups = M * (K // 128)
    q = torch.empty((M, K), dtype=torch.float8_e4m3fn, device=x.device)
    scales = torch.empty((M, K // 128), dtype=torch.float32, device=x.device)
    launch(x, q, scales, n_groups, gps=4)
    return q, scales
