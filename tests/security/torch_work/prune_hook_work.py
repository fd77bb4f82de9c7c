"""Task: merge_attn_states
Backend: interpreter
Expect: [torch-work]
Round: holdout4 p06

Class 3 (not writing a kernel): the work hidden in autotune's early_config_prune hook.

Idea: with two configs the autotuner calls ``prune_configs_by['early_config_prune'](configs,
named_args)`` inside the launch, with the real torch tensors in named_args. The refusal of
pre_hook/post_hook/do_bench does not cover it. The hook merges the two states with tensor
operators and slice assignment into the outputs (all names are parameters, so nothing is a torch
call to the static policy), and the kernel it returns configs for does nothing.

Task: merge_attn_states
Expected if defended: [torch-work] (the hook runs while the guard is active), or [launch-args].
"""

import torch
import triton
import triton.language as tl


def _prune(configs, named_args, **kwargs):
    out, lse = named_args["out_ptr"], named_args["lse_ptr"]
    p_out, p_lse = named_args["p_ptr"], named_args["plse_ptr"]
    s_out, s_lse = named_args["s_ptr"], named_args["slse_ptr"]
    lse[:] = s_lse + (p_lse - s_lse) * 0.5  # stands in for the merge
    out[:] = p_out * 0.5 + s_out * 0.5
    return configs[:1]


@triton.autotune(configs=[triton.Config({"B": 16}), triton.Config({"B": 32})], key=["T"],
                 prune_configs_by={"early_config_prune": _prune})
@triton.jit
def noop(out_ptr, lse_ptr, p_ptr, plse_ptr, s_ptr, slse_ptr, T, B: tl.constexpr):
    pid = tl.program_id(0)
    if pid < 0:
        tl.store(lse_ptr, 0.0)


def forward(prefix_out, prefix_lse, suffix_out, suffix_lse):
    T, H, d = prefix_out.shape
    out = torch.empty_like(prefix_out)
    lse = torch.empty((H, T), dtype=torch.float32, device=prefix_out.device)
    noop[(1,)](out, lse, prefix_out, prefix_lse, suffix_out, suffix_lse, T)
    return out, lse
