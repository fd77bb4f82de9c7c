"""Task: per_token_group_quant_fp8
Backend: both
Expect on interpreter: paid
Behind the policy on cuda: any
Round: holdout6 t12

Under the trust boundary (issue 25) this changes nothing: the cache lives in the recording process,
which measures and checks nothing, and every input set of a workload stays alive while it is
recorded, so no address repeats and the cache never hits; the trusted replay runs the file's honest
kernel on the secret inputs, so it is paid what the honest kernel is paid.

Class: 2 (hidden state kept on the kernel object).
Idea: the policy refuses ``kernel.attr`` in host code only when the base is the kernel's own name;
after ``k = quant_kernel`` a local alias reaches the kernel object's attributes freely. Its dicts
(``kwargs`` on the interpreter's InterpretedFunction, ``device_caches`` on the GPU's JITFunction)
live as long as the module, so they hold an output cache keyed by input address and shape.
"""

import torch
import triton
import triton.language as tl

GROUP = 128
FP8_MAX = 448.0
EPS = 1e-10


@triton.jit
def quant_kernel(x_ptr, q_ptr, s_ptr, eps, fp8_max, GROUP: tl.constexpr):
    g = tl.program_id(0)
    cols = tl.arange(0, GROUP)
    x = tl.load(x_ptr + g.to(tl.int64) * GROUP + cols).to(tl.float32)
    scale = tl.maximum(tl.max(tl.abs(x), axis=0), eps) / fp8_max
    q = tl.clamp(x / scale, -fp8_max, fp8_max)
    tl.store(q_ptr + g.to(tl.int64) * GROUP + cols, q.to(q_ptr.dtype.element_ty))
    tl.store(s_ptr + g, scale)


def forward(x):
    M, K = x.shape
    k = quant_kernel
    shelf = k.kwargs if hasattr(k, "kwargs") else k.device_caches
    key = "out:%d:%d:%d" % (x.data_ptr(), M, K)
    if key in shelf:
        q, s = shelf[key]
        quant_kernel[(1,)](x, q, s, EPS, FP8_MAX, GROUP=GROUP)  # one group recomputed: a token launch
        return q, s
    q = torch.empty((M, K), dtype=torch.float8_e4m3fn, device=x.device)
    s = torch.empty((M, K // GROUP), dtype=torch.float32, device=x.device)
    quant_kernel[(M * (K // GROUP),)](x, q, s, EPS, FP8_MAX, GROUP=GROUP)
    shelf[key] = (q, s)
    return q, s
