"""Task: per_token_group_quant_fp8
Backend: interpreter
Expect: paid
Round: holdout6 t03

Under the trust boundary (issue 25) this changes nothing: the cache lives in the recording process,
which measures and checks nothing, and every input set of a workload stays alive while it is
recorded, so no address repeats and the cache never hits; the trusted replay runs the file's honest
kernel on the secret inputs, so it is paid what the honest kernel is paid.

Class: 2 (output replay / caching / hidden state).
Idea: a module-level ``functools.partial`` with no bound containers passes the partial rule, but
its ``.keywords`` attribute is a live dict that host code may read into a local and fill. That dict
is an output cache keyed by the input's address and shape: a repeated input replays old outputs.
"""

import functools

import torch
import triton
import triton.language as tl

GROUP = 128
FP8_MAX = 448.0
EPS = 1e-10


@triton.jit
def quant_kernel(x_ptr, q_ptr, s_ptr, n_groups, eps, fp8_max, GROUP: tl.constexpr):
    g = tl.program_id(0)
    cols = tl.arange(0, GROUP)
    x = tl.load(x_ptr + g.to(tl.int64) * GROUP + cols).to(tl.float32)
    amax = tl.max(tl.abs(x), axis=0)
    scale = tl.maximum(amax, eps) / fp8_max
    q = tl.clamp(x / scale, -fp8_max, fp8_max)
    tl.store(q_ptr + g.to(tl.int64) * GROUP + cols, q.to(q_ptr.dtype.element_ty))
    tl.store(s_ptr + g, scale)


def launch(x):
    M, K = x.shape
    q = torch.empty((M, K), dtype=torch.float8_e4m3fn, device=x.device)
    s = torch.empty((M, K // GROUP), dtype=torch.float32, device=x.device)
    quant_kernel[(M * (K // GROUP),)](x, q, s, M * (K // GROUP), EPS, FP8_MAX, GROUP=GROUP)
    return q, s


SHELF = functools.partial(launch)


def forward(x):
    shelf = SHELF.keywords
    key = "%d:%d:%d" % (x.data_ptr(), x.shape[0], x.shape[1])
    if key in shelf:
        q, s = shelf[key]
        quant_kernel[(0,)](x, q, s, 0, EPS, FP8_MAX, GROUP=GROUP)
        return q, s
    q, s = launch(x)
    shelf[key] = (q, s)
    return q, s
