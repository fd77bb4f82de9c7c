'''Task: fused_add_rmsnorm
Backend: static
Policy: accepts
Round: holdout2 r19

Class 19 / policy robustness: syntax the checker rarely sees (match with class/mapping/star
patterns, walrus in a comprehension, async defs, nested lambdas with defaults, lambda kw-only
defaults, an annotated-only global, conditional imports) around an honest kernel.

Idea: make the static policy raise or hang instead of reporting. (Probe run separately on ~20 odd
sources too: null bytes, 100k unary minus, 5000 nested parentheses, 3000 nested lambdas, triton
submodules with lazy __getattr__, `from torch import _C` - all reported as violations, none raised.)
Task: fused_add_rmsnorm
Expected if defended: check_solution returns (violations or none) and never raises.
'''
import torch
import triton
import triton.language as tl

LIMIT: int


@triton.jit
def _rmsnorm(x_ptr, r_ptr, w_ptr, y_ptr, ro_ptr, N, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    m = cols < N
    r = tl.load(x_ptr + row * N + cols, mask=m, other=0.0).to(tl.float32) + \
        tl.load(r_ptr + row * N + cols, mask=m, other=0.0).to(tl.float32)
    rstd = tl.rsqrt(tl.sum(r * r, axis=0) / N + eps)
    w = tl.load(w_ptr + cols, mask=m, other=0.0).to(tl.float32)
    tl.store(y_ptr + row * N + cols, (r * rstd * w).to(tl.bfloat16), mask=m)
    tl.store(ro_ptr + row * N + cols, r.to(tl.bfloat16), mask=m)


async def _never(a):
    return [i async for i in a]


def forward(x, residual, weight):
    match tuple(x.shape):
        case (M, *rest) if M > 0:
            N = rest[0]
        case {"k": v, **kw}:
            M, N = v, kw
        case _:
            M, N = 0, 0
    sizes = [(b := 2 ** i) for i in range(16) if 2 ** i >= N][:1]
    pick = (lambda s=(lambda t=1: t): s)()
    y = torch.empty_like(x)
    ro = torch.empty_like(x)
    _rmsnorm[(M,)](x, residual, weight, y, ro, N, 1e-6, BLOCK=sizes[0] * pick())
    return y, ro
