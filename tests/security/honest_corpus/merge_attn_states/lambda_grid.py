"""Task: merge_attn_states
Backend: interpreter
Expect: paid
Policy: accepts
Workloads: all
Seed: 3882352068
Round: honest corpus

Idiom: a lambda grid reading the block size from the launch's meta-parameters."""

import torch
import triton
import triton.language as tl


@triton.jit
def merge_attn_states_kernel(output, output_lse, prefix_output, prefix_lse, suffix_output, suffix_lse,
                             num_tokens, num_heads, head_size, BLOCK_T: tl.constexpr, PADDED_HEAD: tl.constexpr):
    token_block = tl.program_id(0)
    head = tl.program_id(1)
    toks = token_block * BLOCK_T + tl.arange(0, BLOCK_T)
    tmask = toks < num_tokens
    p_lse = tl.load(prefix_lse + head * num_tokens + toks, mask=tmask, other=0.0)
    s_lse = tl.load(suffix_lse + head * num_tokens + toks, mask=tmask, other=0.0)
    p_lse = tl.where(p_lse == float("inf"), float("-inf"), p_lse)
    s_lse = tl.where(s_lse == float("inf"), float("-inf"), s_lse)
    max_lse = tl.maximum(p_lse, s_lse)
    p_se = tl.exp(p_lse - max_lse)
    s_se = tl.exp(s_lse - max_lse)
    out_se = p_se + s_se
    tl.store(output_lse + head * num_tokens + toks, tl.log(out_se) + max_lse, mask=tmask)
    d = tl.arange(0, PADDED_HEAD)
    mask = tmask[:, None] & (d < head_size)[None, :]
    offs = toks.to(tl.int64)[:, None] * (num_heads * head_size) + head * head_size + d[None, :]
    p = tl.load(prefix_output + offs, mask=mask, other=0.0).to(tl.float32)
    s = tl.load(suffix_output + offs, mask=mask, other=0.0).to(tl.float32)
    o = p * (p_se / out_se)[:, None] + s * (s_se / out_se)[:, None]
    tl.store(output + offs, o.to(output.dtype.element_ty), mask=mask)


def forward(prefix_out, prefix_lse, suffix_out, suffix_lse):
    num_tokens, num_heads, head_size = prefix_out.shape
    output = torch.empty_like(prefix_out)
    output_lse = torch.empty_like(prefix_lse)
    padded = triton.next_power_of_2(head_size)
    grid = lambda meta: (triton.cdiv(num_tokens, meta["BLOCK_T"]), num_heads)  # noqa: E731
    merge_attn_states_kernel[grid](output, output_lse, prefix_out, prefix_lse, suffix_out, suffix_lse,
                                   num_tokens, num_heads, head_size, BLOCK_T=8, PADDED_HEAD=padded)
    return output, output_lse
