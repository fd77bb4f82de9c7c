"""Checker for matrix inverses: the residual M·X − I, not the distance to another inverse.

Two honest inverses of an ill-conditioned matrix can differ far more than either's residual: the
error of X is about the condition number times the residual. So an inverse output is checked the way
numerical analysis judges it: per matrix, max |M·X − I| (computed in float64 from the inputs)
must stay below ``rel_tol`` times max (|M|·|X|), the scale of the products the solution formed.
fp32 arithmetic in any stable order (substitution, blocked products) keeps this near
n · 2**-24; rounding products to tf32 or bf16 does not. Entries the structure fixes (the upper
triangle of a lower-triangular inverse, padding) must be exactly zero.

The task supplies ``blocks(inputs, output) -> (M, X, zero)``: M and X [num, n, n] float64 (each of
the num matrices and the solution's inverse of it, with padding rows and columns already identity
in M and X or masked out by the caller), and ``zero`` a [num, n, n] bool mask of entries of X that
must be exactly 0. Where the task admits more than one rounding of the matrix itself (an operand
rounded to the dtype a real system feeds its tensor cores, or not), M may be a tuple of such
variants: the output passes if every one of its matrices passes against one same variant.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import torch

from d2k_env.task import CheckResult
from d2k_env.tasks.checks import Check


@dataclass(frozen=True)
class InverseResidual(Check):
    """The single output ``output`` holds inverses of matrices the task builds from its inputs;
    ``blocks`` pairs them (see the module docstring)."""

    blocks: Callable[[tuple, torch.Tensor], tuple[torch.Tensor, torch.Tensor, torch.Tensor]]
    output: str
    rel_tol: float
    what: str = "each matrix"
    why: str = "fp32 arithmetic in any stable order stays near n * 2**-24; tf32 or bf16 products do not"

    def verdict(self, outputs, expected, inputs):
        out = outputs[self.output]
        name = self.output
        if not bool(torch.isfinite(out).all()):
            return CheckResult(False, f"{name}: contains NaN or infinity")
        variants, X, zero = self.blocks(inputs, out)
        if X.numel() == 0:
            return CheckResult(True, "no matrices")
        nonzero = zero & (X != 0)
        if bool(nonzero.any()):
            i, r, c = (int(v) for v in torch.nonzero(nonzero)[0])
            return CheckResult(False, f"{name}: {self.what} {i}: entry ({r}, {c}) must be exactly 0 (the structure "
                                      f"fixes it); got {X[i, r, c].item():.6g}")
        first = None
        for M in variants if isinstance(variants, tuple) else (variants,):
            eye = torch.eye(M.shape[-1], dtype=M.dtype, device=M.device)
            residual = (M @ X - eye).abs().amax(dim=(-2, -1))
            scale = (M.abs() @ X.abs()).amax(dim=(-2, -1))
            ratio = residual / scale
            worst = int(ratio.argmax())
            if ratio[worst] <= self.rel_tol:
                return CheckResult(True, f"every residual within {self.rel_tol:g} of its scale",
                                   residual.max().item(), ratio[worst].item())
            first = first or CheckResult(
                False, f"{name}: {self.what} {worst}: max |M·X - I| = {residual[worst].item():.3g} is "
                       f"{ratio[worst].item():.3g} of max(|M|·|X|) = {scale[worst].item():.3g}, over {self.rel_tol:g}",
                residual[worst].item(), ratio[worst].item())
        return first

    def describe(self, outputs):
        return (f"{self.output}: for {self.what}, the residual max |M·X - I| of the solution's inverse X (float64, M "
                f"from the inputs) at most {self.rel_tol:g} times max(|M|·|X|), and every entry the structure fixes "
                f"exactly 0 ({self.why}). NaN and infinities never pass.")

    def problem(self, outputs):
        names = {o.name: o.dtype for o in outputs}
        if self.output not in names:
            return f"no output named {self.output!r} (outputs: {', '.join(names)})"
        if not names[self.output].is_floating_point:
            return f"{self.output!r} must be a float output, not {names[self.output]}"
        return None
