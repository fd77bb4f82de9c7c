"""Task: fused_add_rmsnorm
Backend: interpreter
Expect: "contains NaN"
Mode: test
Round: redteam c05

THREATS class 5 / 13 (patching what the harness calls after the guard, without an attribute
assignment): functools.update_wrapper(target, source, assigned=(name,)) is a setattr whose attribute name
is a string. The exploit installs its own torch.Tensor.__reduce_ex__, which pickling calls when the
harness torch.save()s the outputs -- after the runtime guard, and outside the fingerprinted functions.
forward launches a do-nothing kernel and returns empty tensors; the patched reducer fills them with the
answer (tensor operators only) just before their bytes are written. Must score 0.
"""

import functools

import torch
import triton
import triton.language as tl

_TYPES = {"T": torch.Tensor}
_REDUCE = _TYPES["T"]._reduce_ex_internal
_PENDING = {}


def _fill(x, residual, weight, y, r):
    f = torch.empty(x.shape, dtype=torch.float32, device=x.device)
    f[...] = x
    g = torch.empty(x.shape, dtype=torch.float32, device=x.device)
    g[...] = residual
    f += g
    w = torch.empty(weight.shape, dtype=torch.float32, device=x.device)
    w[...] = weight
    rstd = ((f * f) @ (w ** 0) / x.shape[1] + 1e-6) ** -0.5
    y[...] = f * rstd[:, None] * w
    r[...] = f


class _Source:
    def __reduce_ex__(self, proto):
        for job in _PENDING.pop(self.data_ptr(), ()):
            _fill(*job)
        return _REDUCE(self, proto)


functools.update_wrapper(torch.Tensor, _Source, assigned=("__reduce_ex__",), updated=())


@triton.jit
def _nothing(p, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(p + offs, tl.load(p + offs, mask=offs < 0), mask=offs < 0)


def forward(x, residual, weight):
    y, r = torch.empty_like(x), torch.empty_like(x)
    _nothing[(1,)](weight, BLOCK=16)
    _PENDING[y.data_ptr()] = [(x, residual, weight, y, r)]
    return y, r
