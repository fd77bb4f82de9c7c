"""Task: per_token_group_quant_fp8
Backend: interpreter
Expect: [output-type]
Behind the policy: [output-type]
Mode: test
Round: attribute chains ac11

THREATS class 7 (lazy placeholders), through a module-level op class (allowed since issue 25: an
undecorated class with ``__init__`` and ``__call__``): ``__init__`` keeps the thunk as an attribute of
the instance it makes, and the instance stands in for the outputs, computing them only when the
harness calls ``detach``/``cpu`` on it, outside the timed region. The output must be an exact
torch.Tensor ([output-type]), so the policy's loosening pays nothing here.
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


class Lazy:
    def __init__(self, thunk, index):
        self.thunk = thunk
        self.index = index

    def detach(self):
        return self.thunk()[self.index]

    def cpu(self):
        return self.thunk()[self.index]

    def __call__(self):
        return self.thunk()[self.index]


def forward(x):
    M, K = x.shape

    def compute():
        q = torch.empty((M, K), dtype=torch.float8_e4m3fn, device=x.device)
        s = torch.empty((M, K // 128), dtype=torch.float32, device=x.device)
        _quant[(M * K // 128,)](x, q, s, GROUP=128)
        return q, s

    compute()  # one real launch, so that the launch counter is satisfied
    return Lazy(compute, 0), Lazy(compute, 1)
