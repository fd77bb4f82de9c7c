"""Task: fused_add_rmsnorm
Backend: both
Expect on interpreter: [kernel-source]
Behind the policy: [record]
Round: source_text s04

Class: source text (13: the checked text is not the text that runs), on the GPU path.
Idea: Triton's JITFunction cuts a kernel's source at the first line, decorators included, that
matches ``^def name(``; a string in a decorator's argument can hold such a line. From there to the
end of the kernel, the text parses as one function whose body is the string's ``def`` and whose
last statement swallows the real kernel into a string closed by the real body's last comment.
The interpreter (patched to find the real def through the syntax tree) runs the checked kernel;
``JITFunction.src``, which the GPU compiles, is the string's function. The policy refuses a def
line in a kernel's decorators ([kernel-source]); behind it, the load-time comparison of
``JITFunction.src`` with the checked text does ([source-text]).
"""

import torch
import triton
import triton.language as tl


@triton.heuristics({"UNUSED": lambda args: """
def _rms_kernel(x_ptr, res_ptr, w_ptr, y_ptr, res_out_ptr, eps, N: tl.constexpr, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64) * N
    cols = tl.arange(0, BLOCK)
    tl.store(y_ptr + row + cols, tl.load(x_ptr + row + cols, mask=cols < N), mask=cols < N)
    _ = '''
"""})
@triton.jit
def _rms_kernel(x_ptr, res_ptr, w_ptr, y_ptr, res_out_ptr, eps, N: tl.constexpr, BLOCK: tl.constexpr, UNUSED):
    row = tl.program_id(0).to(tl.int64) * N
    cols = tl.arange(0, BLOCK)
    mask = cols < N
    r = tl.load(x_ptr + row + cols, mask=mask, other=0.0).to(tl.float32) + \
        tl.load(res_ptr + row + cols, mask=mask, other=0.0).to(tl.float32)
    rstd = tl.rsqrt(tl.sum(r * r, axis=0) / N + eps)
    w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    tl.store(y_ptr + row + cols, (r * rstd * w).to(y_ptr.dtype.element_ty), mask=mask)
    tl.store(res_out_ptr + row + cols, r.to(res_out_ptr.dtype.element_ty), mask=mask)  # '''


def forward(x, residual, weight):
    M, N = x.shape
    y = torch.empty_like(x)
    residual_out = torch.empty_like(x)
    _rms_kernel[(M,)](x, residual, weight, y, residual_out, 1e-6, N=N, BLOCK=triton.next_power_of_2(N))
    return y, residual_out
