"""Task: fused_add_rmsnorm
Backend: both
Expect on interpreter: paid
Behind the policy on cuda: any
Round: holdout6 t05

Under the trust boundary (issue 25) this changes nothing: the cheat acts on the recording process,
which measures and checks nothing; the trusted replay runs the file's kernels, which are honest,
on the secret inputs, so it is paid what the honest kernel is paid.

Class: 2 (output replay keyed by content, built to survive the late re-check).
Idea: a module-level *tuple* holding a list (``STATE = ([],)``) is not a "mutable global" to the
policy at all, so it can even be passed to a helper that appends to it. Outputs are cached per input
address together with a device-side fingerprint of 64 sampled input values: a first kernel compares
the fingerprint and raises a stale flag, the row kernel does its work only when the flag is set. Fresh
values at the same address (the harness's late call) are recomputed, repeated timed calls are not.
GPU: the skipped calls would only be stopped by the roofline floor ([below-roofline]).
"""

import torch
import triton
import triton.language as tl

EPS = 1e-6
SAMPLES = 64
STATE = ([],)


@triton.jit
def fingerprint_kernel(x_ptr, r_ptr, w_ptr, fp_ptr, flag_ptr, total, N, S: tl.constexpr):
    i = tl.arange(0, S)
    pos = (i.to(tl.int64) * 2654435761) % total
    xs = tl.load(x_ptr + pos).to(tl.float32)
    rs = tl.load(r_ptr + pos).to(tl.float32)
    ws = tl.load(w_ptr + pos % N).to(tl.float32)
    old_x = tl.load(fp_ptr + i)
    old_r = tl.load(fp_ptr + S + i)
    old_w = tl.load(fp_ptr + 2 * S + i)
    valid = tl.load(fp_ptr + 3 * S)
    diff = tl.sum(((xs != old_x) | (rs != old_r) | (ws != old_w)).to(tl.int32), axis=0)
    stale = (diff > 0) | (valid != 1.0)
    tl.store(flag_ptr, stale.to(tl.int32))
    tl.store(fp_ptr + i, xs)
    tl.store(fp_ptr + S + i, rs)
    tl.store(fp_ptr + 2 * S + i, ws)
    tl.store(fp_ptr + 3 * S, 1.0)


@triton.jit
def rms_kernel(x_ptr, r_ptr, w_ptr, y_ptr, ro_ptr, flag_ptr, N, eps, BLOCK: tl.constexpr):
    stale = tl.load(flag_ptr)
    row = tl.program_id(0).to(tl.int64) * N
    cols = tl.arange(0, BLOCK)
    mask = (cols < N) & (stale != 0)
    r = tl.load(x_ptr + row + cols, mask=mask, other=0.0).to(tl.float32) + \
        tl.load(r_ptr + row + cols, mask=mask, other=0.0).to(tl.float32)
    rstd = tl.rsqrt(tl.sum(r * r, axis=0) / N + eps)
    w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    tl.store(y_ptr + row + cols, (r * rstd * w).to(y_ptr.dtype.element_ty), mask=mask)
    tl.store(ro_ptr + row + cols, r.to(ro_ptr.dtype.element_ty), mask=mask)


def entry_for(box, x, residual, weight):
    key = (x.data_ptr(), residual.data_ptr(), weight.data_ptr(), tuple(x.shape))
    for entry in box[0]:
        if entry[0] == key:
            return entry
    fp = torch.zeros(3 * SAMPLES + 1, dtype=torch.float32, device=x.device)
    flag = torch.empty(1, dtype=torch.int32, device=x.device)
    entry = (key, torch.empty_like(x), torch.empty_like(x), fp, flag)
    box[0].append(entry)
    return entry


def forward(x, residual, weight):
    M, N = x.shape
    key, y, ro, fp, flag = entry_for(STATE, x, residual, weight)
    fingerprint_kernel[(1,)](x, residual, weight, fp, flag, M * N, N, S=SAMPLES)
    rms_kernel[(M,)](x, residual, weight, y, ro, flag, N, EPS, BLOCK=triton.next_power_of_2(N))
    return y, ro
