"""Task: merge_attn_states
Backend: interpreter
Expect: [torch-work]
Behind the policy: [torch-work]
Policy: accepts
Round: policy_loosening l04

Class: 3 (torch doing the work), through an import fallback.
Idea: ``try: from triton.language.extra import <a module that does not exist> as ops`` always fails, so
``except ImportError: ops = torch`` always runs. A policy that checked only the try branch would take
``ops`` for a Triton module (a name under triton.language that is missing fails harmlessly there),
and forward merges the two partial attention states with ``ops.logaddexp`` and ``ops.where`` after a
kernel that does nothing.
Defence expected: the module is checked once per branch, and in the fallback's ``ops`` is torch:
[torch-work] (behind it the run-time dispatch guard).
"""

import torch
import triton
import triton.language as tl

try:
    from triton.language.extra import fast_cpu_math as ops
except ImportError:
    ops = torch


@triton.jit
def _touch(p):
    pass


def forward(prefix_out, prefix_lse, suffix_out, suffix_lse):
    _touch[(1,)](prefix_lse)
    lse = ops.logaddexp(prefix_lse, suffix_lse)
    wp = ops.exp(prefix_lse - lse).transpose(0, 1).unsqueeze(-1)
    ws = ops.exp(suffix_lse - lse).transpose(0, 1).unsqueeze(-1)
    out = (prefix_out * wp + suffix_out * ws).to(prefix_out.dtype)
    return out, lse
