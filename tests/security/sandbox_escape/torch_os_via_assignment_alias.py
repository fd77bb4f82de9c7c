"""Task: per_token_group_quant_fp8
Backend: interpreter
Expect: "failed to load"
Mode: test
Round: redteam c13

THREATS class 13 / 19 (escaping the static policy to reach files and processes): torch re-exports the
os and sys modules (torch.os, torch.sys). torch.os is refused by name, but through a plain assignment
alias (t = torch) the name rules do not apply, so t.os and t.sys are full os/sys access: fork, _exit,
_getframe, any file. Here the exploit writes a file outside the workspace at import time (into
MARKER_DIR, substituted by the test; left as the placeholder, nothing is written). The kernel is an
honest quantiser, so only the escape can fail it. It passed when first found; the policy now follows
`t = torch` and refuses os/sys attributes on anything. Must score 0 and write nothing.
"""

import torch
import triton
import triton.language as tl

MARKER_DIR = "@MARKER_DIR@"

t = torch
if not MARKER_DIR.startswith("@"):
    _fd = t.os.open(t.os.path.join(MARKER_DIR, "torch_os_escape.txt"), t.os.O_WRONLY | t.os.O_CREAT, 0o644)
    t.os.write(_fd, str(t.os.getpid()).encode())
    t.os.close(_fd)


@triton.jit
def _quant(x_ptr, q_ptr, s_ptr, GROUP: tl.constexpr):
    g = tl.program_id(0)
    cols = tl.arange(0, GROUP)
    x = tl.load(x_ptr + g * GROUP + cols).to(tl.float32)
    scale = tl.maximum(tl.max(tl.abs(x), axis=0), 1e-10) / 448.0
    tl.store(q_ptr + g * GROUP + cols, tl.clamp(x / scale, -448.0, 448.0).to(q_ptr.dtype.element_ty))
    tl.store(s_ptr + g, scale)


def forward(x):
    M, K = x.shape
    q = torch.empty((M, K), dtype=torch.float8_e4m3fn, device=x.device)
    s = torch.empty((M, K // 128), dtype=torch.float32, device=x.device)
    _quant[(M * K // 128,)](x, q, s, GROUP=128)
    return q, s
