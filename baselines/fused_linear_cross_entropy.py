"""PyTorch eager baseline: the LM head and cross-entropy through autograd, as Liger-Kernel's torch
comparison (and every trainer without a fused kernel) computes them: the full [BT, V] logits in bf16,
cast to fp32, F.cross_entropy with ignore_index -100 and mean reduction, then backward."""

import torch
from torch.nn import functional as F


def forward(h, weight, targets):
    # The task's GEMMs accumulate in fp32 and round once. By default torch lets cuBLAS add split-K
    # partial sums in bf16 (allow_bf16_reduced_precision_reduction), which rounds every partial, not
    # only the result; its heuristics split K for few rows and a long K (the logits of 268 tokens over
    # H = 15440, grad_h over V). Disallowed for this call, restored after.
    matmul = torch.backends.cuda.matmul
    reduced = matmul.allow_bf16_reduced_precision_reduction
    matmul.allow_bf16_reduced_precision_reduction = False
    try:
        h_, w_ = h.detach().requires_grad_(), weight.detach().requires_grad_()
        with torch.enable_grad():
            logits = (h_ @ w_.t()).float()
            loss = F.cross_entropy(logits, targets, ignore_index=-100, reduction="mean")
            grad_h, grad_w = torch.autograd.grad(loss, (h_, w_))
        return loss.detach(), grad_h, grad_w.float()
    finally:
        matmul.allow_bf16_reduced_precision_reduction = reduced
