"""Task: causal_conv1d_varlen
Backend: interpreter
Expect: paid
Policy: accepts
Seed: 10319675
Round: honest corpus

Idiom: a port in the style of vLLM's Triton causal_conv1d_fn (vllm/model_executor/layers/mamba/ops/causal_conv1d.py): one program per (sequence, channel block) walking its tokens with the window held in registers (col0, col1, col2), written from its approach; the new states go to a copied tensor instead of the cache in place."""

import torch
import triton
import triton.language as tl

PAD_SLOT_ID = tl.constexpr(-1)


@triton.jit
def _copy_states_kernel(src, dst, numel, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(dst + offs, tl.load(src + offs, mask=offs < numel), mask=offs < numel)


@triton.jit
def _causal_conv1d_fwd_kernel(x_ptr, w_ptr, bias_ptr, conv_states_ptr, query_start_loc_ptr, cache_indices_ptr,
                              has_initial_states_ptr, o_ptr, new_states_ptr, dim,
                              stride_x_token, stride_w_dim, stride_istate_seq, stride_istate_dim,
                              BLOCK_N: tl.constexpr):
    idx_seq = tl.program_id(0)
    chunk_offset = tl.program_id(1)
    idx_feats = chunk_offset * BLOCK_N + tl.arange(0, BLOCK_N)
    mask_w = idx_feats < dim

    sequence_start_index = tl.load(query_start_loc_ptr + idx_seq)
    sequence_end_index = tl.load(query_start_loc_ptr + idx_seq + 1)
    seqlen = sequence_end_index - sequence_start_index
    conv_state_batch_coord = tl.load(cache_indices_ptr + idx_seq).to(tl.int64)

    if conv_state_batch_coord == PAD_SLOT_ID:
        for idx_token in range(seqlen):
            tl.store(o_ptr + (sequence_start_index + idx_token) * stride_x_token + idx_feats,
                     tl.zeros([BLOCK_N], dtype=tl.float32).to(o_ptr.dtype.element_ty), mask=mask_w)
    else:
        load_init_state = tl.load(has_initial_states_ptr + idx_seq) != 0
        state_ptrs = conv_states_ptr + conv_state_batch_coord * stride_istate_seq + idx_feats * stride_istate_dim
        col0 = tl.load(state_ptrs + 0, mask=mask_w & load_init_state, other=0.0).to(tl.float32)
        col1 = tl.load(state_ptrs + 1, mask=mask_w & load_init_state, other=0.0).to(tl.float32)
        col2 = tl.load(state_ptrs + 2, mask=mask_w & load_init_state, other=0.0).to(tl.float32)

        w_col0 = tl.load(w_ptr + idx_feats * stride_w_dim + 0, mask=mask_w, other=0.0).to(tl.float32)
        w_col1 = tl.load(w_ptr + idx_feats * stride_w_dim + 1, mask=mask_w, other=0.0).to(tl.float32)
        w_col2 = tl.load(w_ptr + idx_feats * stride_w_dim + 2, mask=mask_w, other=0.0).to(tl.float32)
        w_col3 = tl.load(w_ptr + idx_feats * stride_w_dim + 3, mask=mask_w, other=0.0).to(tl.float32)
        bias = tl.load(bias_ptr + idx_feats, mask=mask_w, other=0.0).to(tl.float32)

        for idx_token in range(seqlen):
            x_ptrs = x_ptr + (sequence_start_index + idx_token) * stride_x_token + idx_feats
            matrix_x = tl.load(x_ptrs, mask=mask_w, other=0.0).to(tl.float32)
            acc = bias + w_col0 * col0 + w_col1 * col1 + w_col2 * col2 + w_col3 * matrix_x
            acc = acc / (1 + tl.exp(-acc))
            tl.store(o_ptr + (sequence_start_index + idx_token) * stride_x_token + idx_feats,
                     acc.to(o_ptr.dtype.element_ty), mask=mask_w)
            col0 = col1
            col1 = col2
            col2 = matrix_x

        new_ptrs = new_states_ptr + conv_state_batch_coord * stride_istate_seq + idx_feats * stride_istate_dim
        tl.store(new_ptrs + 0, col0.to(new_states_ptr.dtype.element_ty), mask=mask_w)
        tl.store(new_ptrs + 1, col1.to(new_states_ptr.dtype.element_ty), mask=mask_w)
        tl.store(new_ptrs + 2, col2.to(new_states_ptr.dtype.element_ty), mask=mask_w)


def forward(x, weight, bias, conv_states, query_start_loc, cache_indices, has_initial_state):
    cu_seqlen, dim = x.shape
    batch = cache_indices.shape[0]
    out = torch.empty_like(x)
    new_states = torch.empty_like(conv_states)
    numel = conv_states.numel()
    _copy_states_kernel[(triton.cdiv(numel, 1024),)](conv_states, new_states, numel, BLOCK=1024)
    BLOCK_N = 256
    grid = (batch, triton.cdiv(dim, BLOCK_N))
    _causal_conv1d_fwd_kernel[grid](x, weight, bias, conv_states, query_start_loc, cache_indices, has_initial_state,
                                    out, new_states, dim, x.stride(0), weight.stride(0), conv_states.stride(0),
                                    conv_states.stride(1), BLOCK_N=BLOCK_N)
    return out, new_states
