"""Merge two partial attention states by their log-sum-exps: expert Triton reference.

Each program owns one head and a block of tokens. The merge weights depend only on the two LSEs,
so they are computed once per token (from contiguous [H, T] loads) and applied to a whole
[BLOCK_T, d] tile in a single multiply-add pass: every byte is read or written exactly once.
"""

import torch
import triton
import triton.language as tl

# Launch heuristic constants, read at every call so that a tuning sweep can override them.
TILE_ELEMS = 2048        # elements per [BLOCK_T, d] tile: 4 KB per bf16 input, 12 KB moved per program
ELEMS_PER_WARP = 512     # 16 values per thread = two 16-byte loads in flight per input
MAX_WARPS = 16
MIN_PROGRAMS = 264       # two per SM on a 132-SM H200: shrink BLOCK_T for small problems


@triton.jit
def _merge_attn_states_kernel(
    out_ptr, lse_ptr, p_out_ptr, p_lse_ptr, s_out_ptr, s_lse_ptr,
    T, H, D,
    stride_o_t, stride_o_h, stride_p_t, stride_p_h, stride_s_t, stride_s_h,
    stride_lse_h, stride_plse_h, stride_slse_h,
    BLOCK_T: tl.constexpr, BLOCK_D: tl.constexpr,
):
    # Heads vary fastest across programs, so the programs in flight together sweep whole
    # [BLOCK_T, H, d] slabs of the [T, H, d] tensors (long contiguous DRAM runs). A 1-D grid
    # avoids the 65535 limit on the second grid dimension for long sequences.
    pid = tl.program_id(0)
    h = (pid % H).to(tl.int64)
    toks = (pid // H).to(tl.int64) * BLOCK_T + tl.arange(0, BLOCK_T)
    t_mask = toks < T

    # Contiguous per-head LSE vectors; padding tokens get finite values so no NaN is formed.
    p_lse = tl.load(p_lse_ptr + h * stride_plse_h + toks, mask=t_mask, other=0.0)
    s_lse = tl.load(s_lse_ptr + h * stride_slse_h + toks, mask=t_mask, other=0.0)
    # +inf marks an empty partition: as -inf its weight exp(-inf - m) is exactly 0.
    p_lse = tl.where(p_lse == float("inf"), float("-inf"), p_lse)
    s_lse = tl.where(s_lse == float("inf"), float("-inf"), s_lse)
    m = tl.maximum(p_lse, s_lse)
    w_p = tl.exp(p_lse - m)
    w_s = tl.exp(s_lse - m)
    denom = w_p + w_s
    tl.store(lse_ptr + h * stride_lse_h + toks, m + tl.log(denom), mask=t_mask)
    # Normalise the two scalars per token, not the d-wide vectors.
    c_p = (w_p / denom)[:, None]
    c_s = (w_s / denom)[:, None]

    cols = tl.arange(0, BLOCK_D)
    mask = t_mask[:, None] & (cols < D)[None, :]
    p = tl.load(p_out_ptr + toks[:, None] * stride_p_t + h * stride_p_h + cols[None, :], mask=mask, other=0.0)
    s = tl.load(s_out_ptr + toks[:, None] * stride_s_t + h * stride_s_h + cols[None, :], mask=mask, other=0.0)
    out = p.to(tl.float32) * c_p + s.to(tl.float32) * c_s
    tl.store(out_ptr + toks[:, None] * stride_o_t + h * stride_o_h + cols[None, :],
             out.to(out_ptr.dtype.element_ty), mask=mask)


def launch_config(T, H, d):
    """Token-block size and warp count for a [T, H, d] problem; reads the module constants above."""
    BLOCK_D = triton.next_power_of_2(d)
    BLOCK_T = max(1, TILE_ELEMS // BLOCK_D)
    # Small problems: trade tile size for enough programs to cover every SM.
    while BLOCK_T > 1 and H * triton.cdiv(T, BLOCK_T) < MIN_PROGRAMS:
        BLOCK_T //= 2
    num_warps = triton.next_power_of_2(max(1, min(MAX_WARPS, BLOCK_T * BLOCK_D // ELEMS_PER_WARP)))
    return {"BLOCK_T": BLOCK_T, "BLOCK_D": BLOCK_D, "num_warps": num_warps}


def forward(prefix_out, prefix_lse, suffix_out, suffix_lse):
    T, H, d = prefix_out.shape
    assert suffix_out.shape == (T, H, d) and prefix_lse.shape == (H, T) and suffix_lse.shape == (H, T)
    assert prefix_out.stride(2) == 1 and suffix_out.stride(2) == 1, "head dim must be contiguous"
    assert prefix_lse.stride(1) == 1 and suffix_lse.stride(1) == 1, "LSE token dim must be contiguous"
    cfg = launch_config(T, H, d)
    out = torch.empty((T, H, d), dtype=prefix_out.dtype, device=prefix_out.device)
    lse = torch.empty((H, T), dtype=torch.float32, device=prefix_out.device)
    grid = (H * triton.cdiv(T, cfg["BLOCK_T"]),)
    _merge_attn_states_kernel[grid](
        out, lse, prefix_out, prefix_lse, suffix_out, suffix_lse,
        T, H, d,
        out.stride(0), out.stride(1), prefix_out.stride(0), prefix_out.stride(1),
        suffix_out.stride(0), suffix_out.stride(1),
        lse.stride(0), prefix_lse.stride(0), suffix_lse.stride(0),
        BLOCK_T=cfg["BLOCK_T"], BLOCK_D=cfg["BLOCK_D"], num_warps=cfg["num_warps"],
    )
    return out, lse
