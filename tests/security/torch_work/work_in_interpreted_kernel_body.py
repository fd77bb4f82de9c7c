"""Task: merge_attn_states
Backend: interpreter
Expect: [kernel-language]
Mode: test
Round: redteam c03

THREATS class 3 (kernel launched, work done in torch), on the interpreter backend.

Kernel bodies are exempt from the static torch rules (they are compiled by Triton, not run as Python),
and the runtime guard is paused during a launch. Under TRITON_INTERPRET=1, though, a kernel body is run
as Python: this one reaches the torch tensors through a module-level dict and computes the merge with
their methods (where/exp/log/copy_; no torch name, so a rule against torch names inside kernels does not
see it). On a GPU this kernel would not compile; on the CPU backend it must still score 0.
"""

import torch
import triton
import triton.language as tl

_HOST = {}


@triton.jit
def _merge_in_python(out_ptr, n, BLOCK: tl.constexpr):
    # Under TRITON_INTERPRET=1 this body runs as ordinary Python with the torch guard paused. No torch
    # name appears (tensor methods on objects from a module-level dict), and the interpreter wraps plain
    # assignments in to_tensor(), so walrus expressions hold the intermediate values.
    (a := _HOST["args"])
    (inf := float("inf"))
    (p := a[1].where(a[1] != inf, -inf))
    (s := a[3].where(a[3] != inf, -inf))
    (m := p.maximum(s))
    (wp := (p - m).exp())
    (ws := (s - m).exp())
    a[5].copy_(m + (wp + ws).log())
    a[4].copy_(a[0].float() * (wp / (wp + ws)).transpose(0, 1).unsqueeze(-1)
               + a[2].float() * (ws / (wp + ws)).transpose(0, 1).unsqueeze(-1))


def forward(prefix_out, prefix_lse, suffix_out, suffix_lse):
    T, H, d = prefix_out.shape
    out = torch.empty((T, H, d), dtype=prefix_out.dtype, device=prefix_out.device)
    lse = torch.empty((H, T), dtype=torch.float32, device=prefix_out.device)
    _HOST["args"] = (prefix_out, prefix_lse, suffix_out, suffix_lse, out, lse)
    _merge_in_python[(1,)](out, 1, BLOCK=16)
    return out, lse
