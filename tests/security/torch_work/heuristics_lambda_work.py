'''Task: merge_attn_states
Backend: interpreter
Expect: [torch-work]
Behind the policy: [torch-work]
Round: holdout2 r12

Class 3: the work inside a triton.heuristics function (host code run by the launch machinery).

Idea: Heuristics.run calls each heuristic with the launch's arguments before the kernel runs; the
heuristic here computes the merge with torch ops through bound methods (never a direct call of a
tensor method, so the policy's call check does not fire) and returns a harmless constexpr.
Task: merge_attn_states
Expected if defended: blocked by the torch guard at run time ([torch-work]): heuristics run outside
the launch counter's pause.
'''
import torch
import triton
import triton.language as tl


def _f32(t):
    conv = t.to
    return conv(torch.float32)


def _call(bound, *a):
    return bound(*a)


def _do_it(args):
    p, pl, s, sl, out, lse = args["p_ptr"], args["pl_ptr"], args["s_ptr"], args["sl_ptr"], args["out_ptr"], args["lse_ptr"]
    pl2, sl2 = _f32(pl), _f32(sl)
    mx = _call(pl2.maximum, sl2)
    wp = _call((pl2 - mx).exp)
    ws = _call((sl2 - mx).exp)
    _call(lse.copy_, mx + _call((wp + ws).log))
    cp = _call((wp / (wp + ws)).t)
    cs = _call((ws / (wp + ws)).t)
    merged = _f32(p) * cp[:, :, None] + _f32(s) * cs[:, :, None]
    _call(out.copy_, _call(merged.to, torch.bfloat16))
    return 1


@triton.heuristics({"DUMMY": _do_it})
@triton.jit
def _merge(out_ptr, lse_ptr, p_ptr, pl_ptr, s_ptr, sl_ptr, DUMMY: tl.constexpr):
    tl.load(pl_ptr)


def forward(prefix_out, prefix_lse, suffix_out, suffix_lse):
    out = torch.empty_like(prefix_out)
    lse = torch.empty_like(prefix_lse)
    _merge[(1,)](out, lse, prefix_out, prefix_lse, suffix_out, suffix_lse)
    return out, lse
