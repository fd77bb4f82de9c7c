"""PyTorch eager baseline: vLLM's fallback top-k/top-p (sort, cut at the k-th, softmax, cumsum, scatter
back), with ties at the top-p cut kept together."""

import torch


def forward(logits, k, p):
    logits_sort = logits.sort(dim=-1, descending=False).values
    # Top-k: everything below the k-th largest logit (ties with it are kept).
    kth = logits_sort.gather(1, (logits.size(1) - k.long()).unsqueeze(1))
    logits_sort = logits_sort.masked_fill(logits_sort < kth, float("-inf"))
    # Top-p: mask the ascending prefix whose cumulative probability stays at or below 1 - p.
    probs_sum = logits_sort.softmax(dim=-1).cumsum(dim=-1)
    top_p_mask = probs_sum <= 1 - p.unsqueeze(1)
    top_p_mask[:, -1] = False
    # The smallest kept logit is the row's threshold; vLLM scatters the sorted mask back, which splits
    # a tie group straddling the cut in whatever order the sort left it. Cutting by value keeps it whole.
    threshold = logits_sort.masked_fill(top_p_mask, float("inf")).min(dim=-1, keepdim=True).values
    return logits.masked_fill(logits < threshold, float("-inf"))
