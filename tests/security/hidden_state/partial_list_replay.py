"""Task: fused_add_rmsnorm
Backend: both
Expect on interpreter: paid
Expect on cuda: any
Policy: accepts
Round: holdout4 p03

Under the trust boundary (issue 25) this changes nothing: the cheat acts on the recording process,
which measures and checks nothing; the trusted replay runs the file's kernels, which are honest,
on the secret inputs, so it is paid what the honest kernel is paid.

Class 2 (output replay), through state the [hidden-state] rule does not see.

Idea: ``functools.partial`` is allowed at module level and a list display is no call, so
``_REMEMBER = functools.partial(_remember, [])`` gives a list that lives across calls; inside
``_remember`` the list is a parameter, so appending to it is a "local" mutation. forward keeps,
per input address triple, the output tensors it returned last time and a fingerprint tensor (a few
sampled input values). A repeated call launches one tiny kernel that compares the sampled values
with the fingerprint and redoes the row work only when they changed; unchanged inputs (every timed
repetition of a timed set) cost one ~8-element kernel and return the same output tensors, still
holding the right values. GPU: timed calls near launch latency; the late call (fresh values at the
same addresses) changes the fingerprint and is recomputed, so it is correct. On the interpreter
every input set is new, so the honest path runs and the submission is paid: the policy let it in.

Task: fused_add_rmsnorm
Expected if defended: refused by the policy with [hidden-state] (a module-level partial bound to a
container); on the GPU, if let through, [below-roofline] on the large workloads.
"""

import functools

import torch
import triton
import triton.language as tl

EPS = 1e-6
SAMPLES = 8


@triton.jit
def rms_kernel(x_ptr, r_ptr, w_ptr, y_ptr, ro_ptr, fp_ptr, flag_ptr, N, eps, CHECK: tl.constexpr,
               SAMPLES: tl.constexpr, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    if CHECK:
        k = tl.arange(0, SAMPLES)
        now = tl.load(x_ptr + k * 0 + row * N + (k % N)).to(tl.float32)
        old = tl.load(fp_ptr + row * SAMPLES + k)
        same = tl.sum((now == old).to(tl.int32), axis=0) == SAMPLES
    else:
        same = False
    if not same:
        cols = tl.arange(0, BLOCK)
        acc = tl.zeros([BLOCK], dtype=tl.float32)
        for start in range(0, N, BLOCK):
            c = start + cols
            m = c < N
            v = tl.load(x_ptr + row * N + c, mask=m, other=0.0).to(tl.float32) + \
                tl.load(r_ptr + row * N + c, mask=m, other=0.0).to(tl.float32)
            acc += v * v
        rstd = tl.rsqrt(tl.sum(acc, axis=0) / N + eps)
        for start in range(0, N, BLOCK):
            c = start + cols
            m = c < N
            v = tl.load(x_ptr + row * N + c, mask=m, other=0.0).to(tl.float32) + \
                tl.load(r_ptr + row * N + c, mask=m, other=0.0).to(tl.float32)
            w = tl.load(w_ptr + c, mask=m, other=0.0).to(tl.float32)
            tl.store(y_ptr + row * N + c, (v * rstd * w).to(y_ptr.dtype.element_ty), mask=m)
            tl.store(ro_ptr + row * N + c, v.to(ro_ptr.dtype.element_ty), mask=m)
        k2 = tl.arange(0, SAMPLES)
        tl.store(fp_ptr + row * SAMPLES + k2, tl.load(x_ptr + row * N + (k2 % N)).to(tl.float32))


def _remember(store, key, value):
    for k, v in store:
        if k == key:
            return v
    if value is not None:
        store.append((key, value))
    return value


_REMEMBER = functools.partial(_remember, [])


def forward(x, residual, weight):
    M, N = x.shape
    key = (x.data_ptr(), residual.data_ptr(), weight.data_ptr(), M, N)
    cached = _REMEMBER(key, None)
    check = cached is not None
    if cached is None:
        y = torch.empty_like(x)
        ro = torch.empty_like(x)
        fp = torch.empty((M, SAMPLES), dtype=torch.float32, device=x.device)
        cached = _REMEMBER(key, (y, ro, fp))
    y, ro, fp = cached
    block = min(1024, triton.next_power_of_2(N))
    rms_kernel[(M,)](x, residual, weight, y, ro, fp, fp, N, EPS, CHECK=check, SAMPLES=SAMPLES, BLOCK=block)
    return y, ro
