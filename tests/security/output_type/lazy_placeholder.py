"""Task: per_token_group_quant_fp8
Backend: interpreter
Behind the policy: [output-type] | [launch-args]
Policy: accepts
Mode: test
Round: redteam c07

THREATS class 7 (lazy placeholders): return an object that only computes its value when the harness
touches it (detach/cpu/float), i.e. outside the timed region. The output must be an exact torch.Tensor
([output-type]).
"""

import torch
import triton
import triton.language as tl


@triton.jit
def _quant(x_ptr, q_ptr, s_ptr, GROUP: tl.constexpr):
    g = tl.program_id(0)
    cols = tl.arange(0, GROUP)
    x = tl.load(x_ptr + g * GROUP + cols).to(tl.float32)
    scale = tl.maximum(tl.max(tl.abs(x), axis=0), 1e-10) / 448.0
    tl.store(q_ptr + g * GROUP + cols, tl.clamp(x / scale, -448.0, 448.0).to(q_ptr.dtype.element_ty))
    tl.store(s_ptr + g, scale)


def _lazy(thunk, index):
    class _Lazy:  # a closure, not attributes: nothing is assigned
        def detach(self):
            return thunk()[index]

        def cpu(self):
            return thunk()[index]

    return _Lazy()


def forward(x):
    M, K = x.shape

    def compute():
        q = torch.empty((M, K), dtype=torch.float8_e4m3fn, device=x.device)
        s = torch.empty((M, K // 128), dtype=torch.float32, device=x.device)
        _quant[(M * K // 128,)](x, q, s, GROUP=128)
        return q, s

    compute()  # one real launch, so that the launch counter is satisfied
    return _lazy(compute, 0), _lazy(compute, 1)
