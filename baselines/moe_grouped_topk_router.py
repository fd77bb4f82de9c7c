"""PyTorch eager baseline: DeepSeek-V3 grouped top-k routing as vLLM's grouped_topk falls back to it."""

import torch

N_GROUP = 8
TOPK_GROUP = 4
TOP_K = 8
ROUTED_SCALING_FACTOR = 2.5


def forward(gating_output, e_score_correction_bias):
    T, E = gating_output.shape
    scores = gating_output.sigmoid()
    biased = scores + e_score_correction_bias.unsqueeze(0)
    group_scores = biased.view(T, N_GROUP, -1).topk(2, dim=-1).values.sum(dim=-1)
    group_idx = group_scores.topk(TOPK_GROUP, dim=-1, sorted=False).indices
    group_mask = torch.zeros_like(group_scores).scatter_(1, group_idx, 1)
    score_mask = group_mask.unsqueeze(-1).expand(T, N_GROUP, E // N_GROUP).reshape(T, E)
    masked = biased.masked_fill(score_mask == 0, float("-inf"))
    topk_ids = masked.topk(TOP_K, dim=-1, sorted=False).indices
    topk_weights = scores.gather(1, topk_ids)
    topk_weights = topk_weights / topk_weights.sum(dim=-1, keepdim=True) * ROUTED_SCALING_FACTOR
    return topk_weights.float(), topk_ids.to(torch.int32)
