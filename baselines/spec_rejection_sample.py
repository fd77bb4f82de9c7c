"""PyTorch eager baseline: vLLM's rejection sampler with its noise given, every draft position at once
(acceptance tests, race winners), then the first rejection of each request picked with a cumprod."""

import torch

PLACEHOLDER = -1


def forward(draft_token_ids, cu_num_draft_tokens, draft_probs, target_probs, bonus_token_ids, uniform_probs, q,
            max_spec_len):
    B, N = cu_num_draft_tokens.numel(), draft_token_ids.numel()
    ends = cu_num_draft_tokens.long()
    counts = torch.diff(ends, prepend=ends.new_zeros(1))
    request = torch.repeat_interleave(torch.arange(B, device=ends.device), counts, output_size=N)
    index = torch.arange(N, device=ends.device) - (ends - counts)[request]       # position within its request
    # Accept a draft iff its draft probability is positive and p_target / p_draft >= u.
    d = draft_token_ids.long().unsqueeze(1)
    p_draft, p_target = draft_probs.gather(1, d).squeeze(1), target_probs.gather(1, d).squeeze(1)
    accepted = (p_draft > 0) & (p_target / p_draft >= uniform_probs)
    # A rejected position resamples from normalise(max(p_target - p_draft, 0)): the exponential race
    # argmax(residual / q) draws from it without normalising.
    recovered = ((target_probs - draft_probs).clamp(min=0) / q[request]).argmax(dim=1)
    # Scatter into [B, K]: positions past a request's drafts count as accepted, then the first rejection.
    acc = torch.ones(B, max_spec_len, dtype=torch.bool, device=ends.device)
    acc[request, index] = accepted
    rec = torch.zeros(B, max_spec_len, dtype=torch.long, device=ends.device)
    rec[request, index] = recovered
    drafts = torch.full((B, max_spec_len), PLACEHOLDER, dtype=torch.long, device=ends.device)
    drafts[request, index] = draft_token_ids.long()
    n_accepted = acc.long().cumprod(dim=1).sum(dim=1).clamp(max=counts)             # [B]
    out = torch.full((B, max_spec_len + 1), PLACEHOLDER, dtype=torch.long, device=ends.device)
    cols = torch.arange(max_spec_len + 1, device=ends.device)
    out[:, :max_spec_len] = torch.where(cols[:max_spec_len] < n_accepted[:, None], drafts, PLACEHOLDER)
    rejected = n_accepted < counts
    tail = torch.where(rejected, rec.gather(1, n_accepted.clamp(max=max_spec_len - 1)[:, None]).squeeze(1),
                       bonus_token_ids.long().reshape(-1))
    out.scatter_(1, n_accepted[:, None], tail[:, None])
    return out.to(torch.int32)
