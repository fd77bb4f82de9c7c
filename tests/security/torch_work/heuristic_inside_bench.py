"""Task: merge_attn_states
Backend: cuda
Expect: [torch-work]
Round: holdout5 s06

Class 3 (not writing a kernel), in a heuristic run inside the autotuner's paused benchmark.

Idea: the dispatch guard is paused while the autotuner benchmarks configs (its own L2 flush and
resets are torch ops). A ``@triton.heuristics`` under ``@triton.autotune`` is evaluated inside that
bench for each config, so a heuristic that computes the outputs with tensor operators would run
unrecorded; its value is a harmless constexpr. The guards re-arm heuristics explicitly
(``_wrap_heuristics``); this checks that the re-arming holds inside the bench.
GPU-only: with two configs the autotuner benchmarks, which Triton's interpreter cannot (no driver:
forward raises there before any guard is reached).
Task: merge_attn_states
Expected if defended: [torch-work] (heuristics guarded even inside the bench).
"""

import torch
import triton
import triton.language as tl


def _work(args):
    po, pl, so, sl = args["po"], args["pl"], args["so"], args["sl"]
    out, lse = args["out"], args["lse"]
    T, H, D = po.shape
    inf = float("inf")
    p = torch.empty((H, T), dtype=torch.float32, device=po.device)
    s = torch.empty((H, T), dtype=torch.float32, device=po.device)
    p[...] = pl
    s[...] = sl
    p[p == inf] = -inf
    s[s == inf] = -inf
    m = (p > s) * p + (p <= s) * s
    wp = 2.718281828459045 ** (p - m)
    ws = 2.718281828459045 ** (s - m)
    den = wp + ws
    a = torch.empty((T, H, D), dtype=torch.float32, device=po.device)
    b = torch.empty((T, H, D), dtype=torch.float32, device=po.device)
    a[...] = po
    b[...] = so
    out[...] = (a * (wp / den).t().unsqueeze(2) + b * (ws / den).t().unsqueeze(2))
    lse[...] = m + den ** 0.0 - 1.0
    return 1


@triton.autotune(configs=[triton.Config({"B": 1}), triton.Config({"B": 2})], key=["T"])
@triton.heuristics({"UNUSED": _work})
@triton.jit
def _idle(po, pl, so, sl, out, lse, T, B: tl.constexpr, UNUSED: tl.constexpr):
    pass


def forward(prefix_out, prefix_lse, suffix_out, suffix_lse):
    T, H, D = prefix_out.shape
    out = torch.empty_like(prefix_out)
    lse = torch.empty_like(prefix_lse)
    _idle[(1,)](prefix_out, prefix_lse, suffix_out, suffix_lse, out, lse, T)
    return out, lse
