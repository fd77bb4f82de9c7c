"""Wrong: a token with no adapter (-1) indexes the adapter stack as Python does, and gets the last slot's
LoRA instead of none."""

import torch
import triton
import triton.language as tl


@triton.jit
def _per_token(x_ptr, base_ptr, a_ptr, b_ptr, scales_ptr, token_lora_ptr, y_ptr, L, R, H, NS, N,
               BLOCK_R: tl.constexpr, BLOCK_H: tl.constexpr, BLOCK_N: tl.constexpr):
    t = tl.program_id(0)
    s = tl.program_id(1)
    lora = tl.load(token_lora_ptr + t)
    lora = tl.where(lora < 0, lora + L, lora)  # the bug: -1 becomes the last adapter
    offs_r = tl.arange(0, BLOCK_R)
    offs_h = tl.arange(0, BLOCK_H)
    offs_n = tl.arange(0, BLOCK_N)
    r_ok, h_ok, n_ok = offs_r < R, offs_h < H, offs_n < NS
    x = tl.load(x_ptr + t * H + offs_h, mask=h_ok, other=0.0).to(tl.float32)
    a = tl.load(a_ptr + ((s * L + lora) * R + offs_r[:, None]) * H + offs_h[None, :], mask=r_ok[:, None] & h_ok[None, :],
                other=0.0).to(tl.float32)
    h = tl.sum(a * x[None, :], axis=1)
    b = tl.load(b_ptr + ((s * L + lora) * NS + offs_n[:, None]) * R + offs_r[None, :], mask=n_ok[:, None] & r_ok[None, :],
                other=0.0).to(tl.float32)
    delta = tl.sum(b * h[None, :], axis=1) * tl.load(scales_ptr + lora)
    cols = s * NS + offs_n
    out = tl.load(base_ptr + t * N + cols, mask=n_ok, other=0.0).to(tl.float32) + delta
    tl.store(y_ptr + t * N + cols, out.to(tl.bfloat16), mask=n_ok)


def forward(x, base, lora_a, lora_b, scales, token_lora, sorted_tokens, lora_start):
    T, H = x.shape
    S, L, R = lora_a.shape[:3]
    NS = lora_b.shape[2]
    y = torch.empty_like(base)
    _per_token[(T, S)](x, base, lora_a, lora_b, scales, token_lora, y, L, R, H, NS, S * NS,
                       BLOCK_R=triton.next_power_of_2(R), BLOCK_H=triton.next_power_of_2(H),
                       BLOCK_N=triton.next_power_of_2(NS))
    return y
