"""Task: rope_qk_inplace
Backend: interpreter
Expect: paid
Policy: accepts
Workloads: all
Seed: 2914405117
Round: honest corpus

Idiom: a port of Liger-Kernel's RoPE kernel: one program per token, all q and all k heads as padded [heads, d/2] tiles, the two halves loaded separately, bf16 arithmetic in the tensors' dtype, a constexpr backward flag that flips the sine."""

# Origin: the structure of _triton_rope in Liger-Kernel (src/liger_kernel/ops/rope.py), written anew
# for this task's signature: Liger takes cos/sin already laid out per position, here each program
# gathers its row from the cos/sin cache by the token's position; q and k are [T, heads, d].


import torch
import triton
import triton.language as tl


@triton.jit
def _triton_rope(q_ptr, q_row_stride, k_ptr, k_row_stride, cos_ptr, cos_row_stride, pos_ptr,
                 n_qh: tl.constexpr, n_kh: tl.constexpr, hd: tl.constexpr,
                 pad_n_qh: tl.constexpr, pad_n_kh: tl.constexpr, pad_hd: tl.constexpr,
                 BACKWARD_PASS: tl.constexpr = False):
    pid = tl.program_id(0)
    q_ptr = q_ptr + pid * q_row_stride
    k_ptr = k_ptr + pid * k_row_stride

    pos = tl.load(pos_ptr + pid)
    cos_ptr = cos_ptr + pos * cos_row_stride
    sin_ptr = cos_ptr + hd // 2
    cos_offsets = tl.arange(0, pad_hd // 2)
    cos_mask = cos_offsets < hd // 2
    cos_row = tl.load(cos_ptr + cos_offsets, mask=cos_mask, other=0)
    sin_row = tl.load(sin_ptr + cos_offsets, mask=cos_mask, other=0)

    first_half_q_offsets = tl.arange(0, pad_n_qh)[:, None] * hd + tl.arange(0, pad_hd // 2)[None, :]
    first_half_k_offsets = tl.arange(0, pad_n_kh)[:, None] * hd + tl.arange(0, pad_hd // 2)[None, :]
    first_q_mask = (tl.arange(0, pad_n_qh)[:, None] < n_qh) & (tl.arange(0, pad_hd // 2)[None, :] < hd // 2)
    first_k_mask = (tl.arange(0, pad_n_kh)[:, None] < n_kh) & (tl.arange(0, pad_hd // 2)[None, :] < hd // 2)
    q_tile_1 = tl.load(q_ptr + first_half_q_offsets, mask=first_q_mask, other=0).to(sin_row.dtype)
    k_tile_1 = tl.load(k_ptr + first_half_k_offsets, mask=first_k_mask, other=0).to(sin_row.dtype)

    second_half_q_offsets = first_half_q_offsets + (hd // 2)
    second_half_k_offsets = first_half_k_offsets + (hd // 2)
    q_tile_2 = tl.load(q_ptr + second_half_q_offsets, mask=first_q_mask, other=0).to(sin_row.dtype)
    k_tile_2 = tl.load(k_ptr + second_half_k_offsets, mask=first_k_mask, other=0).to(sin_row.dtype)

    if not BACKWARD_PASS:
        new_q_tile_1 = q_tile_1 * cos_row - q_tile_2 * sin_row
        tl.store(q_ptr + first_half_q_offsets, new_q_tile_1, mask=first_q_mask)
        new_q_tile_2 = q_tile_2 * cos_row + q_tile_1 * sin_row
        tl.store(q_ptr + second_half_q_offsets, new_q_tile_2, mask=first_q_mask)

        new_k_tile_1 = k_tile_1 * cos_row - k_tile_2 * sin_row
        tl.store(k_ptr + first_half_k_offsets, new_k_tile_1, mask=first_k_mask)
        new_k_tile_2 = k_tile_2 * cos_row + k_tile_1 * sin_row
        tl.store(k_ptr + second_half_k_offsets, new_k_tile_2, mask=first_k_mask)
    else:
        new_q_tile_1 = q_tile_1 * cos_row + q_tile_2 * sin_row
        tl.store(q_ptr + first_half_q_offsets, new_q_tile_1, mask=first_q_mask)
        new_q_tile_2 = q_tile_2 * cos_row - q_tile_1 * sin_row
        tl.store(q_ptr + second_half_q_offsets, new_q_tile_2, mask=first_q_mask)

        new_k_tile_1 = k_tile_1 * cos_row + k_tile_2 * sin_row
        tl.store(k_ptr + first_half_k_offsets, new_k_tile_1, mask=first_k_mask)
        new_k_tile_2 = k_tile_2 * cos_row - k_tile_1 * sin_row
        tl.store(k_ptr + second_half_k_offsets, new_k_tile_2, mask=first_k_mask)


def rope_forward(q, k, cos_sin_cache, positions):
    n_row, n_q_head, head_dim = q.shape
    n_kv_head = k.shape[1]
    pad_hd = triton.next_power_of_2(head_dim)
    pad_n_q_head = triton.next_power_of_2(n_q_head)
    pad_n_kv_head = triton.next_power_of_2(n_kv_head)
    _triton_rope[(n_row,)](
        q, q.stride(0), k, k.stride(0), cos_sin_cache, cos_sin_cache.stride(0), positions,
        n_q_head, n_kv_head, head_dim, pad_n_q_head, pad_n_kv_head, pad_hd,
        BACKWARD_PASS=False,
    )
    return q, k


def forward(positions, q, k, cos_sin_cache):
    rope_forward(q, k, cos_sin_cache, positions)
    return ()
