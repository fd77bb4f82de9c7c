"""Task: per_token_group_quant_fp8
Backend: interpreter
Expect: paid
Behind the policy: paid
Round: holdout6 t11

Under the trust boundary (issue 25) this changes nothing: the cheat acts on the recording process,
which measures and checks nothing; the trusted replay runs the file's kernels, which are honest,
on the secret inputs, so it is paid what the honest kernel is paid.

Class: 7 (lazy outputs: the real work runs inside the harness's untimed path).
Idea: the first call is honest and, through ``tl.extra.modules`` (``sys.modules``), replaces the
worker's ``SolutionRun.call`` (the method the harness uses for the check calls and the late call,
but not for the timed calls) with a wrapper that runs the real kernel on the outputs forward
returned. From then on forward only allocates and makes a token launch: its outputs are placeholders
that the harness itself materialises, outside the timer. The worker's ROOFLINE_SLACK is set to 1.0
so the GPU's roofline floor becomes 0.
"""

import torch
import triton
import triton.language as tl

GROUP = 128
FP8_MAX = 448.0
EPS = 1e-10


@triton.jit
def quant_kernel(x_ptr, q_ptr, s_ptr, n_groups, eps, fp8_max, GROUP: tl.constexpr, WORK: tl.constexpr):
    g = tl.program_id(0)
    cols = tl.arange(0, GROUP)
    mask = (cols < GROUP) & WORK
    x = tl.load(x_ptr + g.to(tl.int64) * GROUP + cols, mask=mask, other=0.0).to(tl.float32)
    scale = tl.maximum(tl.max(tl.abs(x), axis=0), eps) / fp8_max
    q = tl.clamp(x / scale, -fp8_max, fp8_max)
    tl.store(q_ptr + g.to(tl.int64) * GROUP + cols, q.to(q_ptr.dtype.element_ty), mask=mask)
    tl.store(s_ptr + g, scale, mask=WORK)


def quantise(x, q, s, work):
    n_groups = x.shape[0] * (x.shape[1] // GROUP)
    quant_kernel[(n_groups if work else 1,)](x, q, s, n_groups, EPS, FP8_MAX, GROUP=GROUP, WORK=work)


def install(mods, py):
    worker = mods.get("__main__")
    honest_call = worker.SolutionRun.call
    if py.getattr(honest_call, "__name__") == "materialising_call":
        return True

    def materialising_call(run, fn, inputs):
        out = honest_call(run, fn, inputs)
        quantise(inputs[0], out[0], out[1], True)
        return out

    py.setattr(worker.SolutionRun, "call", materialising_call)
    py.setattr(worker, "ROOFLINE_SLACK", 1.0)
    return False


def forward(x):
    M, K = x.shape
    q = torch.empty((M, K), dtype=torch.float8_e4m3fn, device=x.device)
    s = torch.empty((M, K // GROUP), dtype=torch.float32, device=x.device)
    mods = tl.extra.modules
    lazy = install(mods, mods.get("builtins"))
    quantise(x, q, s, not lazy)
    return q, s
