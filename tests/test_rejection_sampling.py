"""The rejection-sampling checker (d2k_env.tasks.rejection_sampling): it replays each request along the
solution's tokens, accepts either side of a near-tie, and fails wrong acceptances, wrong resamples, a
missing bonus and missing placeholders."""

import pytest
import torch

from d2k_env.tasks import Output
from d2k_env.tasks.rejection_sampling import RejectionSampled

CHECK = RejectionSampled()


def inputs(u1=0.5, p_draft_row1=None):
    """Two requests over a vocabulary of 4: request 0 drafts tokens 1 then 0, request 1 drafts none.
    Draft 0: ratio 0.5 / 0.25 = 2, accepted. Draft 1: ratio 0.1 / 0.25 = 0.4, rejected by u1 = 0.5;
    its residual max(t - d, 0) is (0, 0.15, 0, 0.15), and its race over q = (1, 2, 1, 1) is won by 3."""
    draft_probs = torch.full((2, 4), 0.25)
    if p_draft_row1 is not None:
        draft_probs[1] = torch.tensor(p_draft_row1)
    target = torch.tensor([[0.1, 0.5, 0.2, 0.2], [0.1, 0.4, 0.1, 0.4]])
    return (torch.tensor([1, 0], dtype=torch.int32), torch.tensor([2, 2], dtype=torch.int32), draft_probs, target,
            torch.tensor([7, 8], dtype=torch.int32), torch.tensor([0.9, u1], dtype=torch.float64),
            torch.tensor([[1.0, 2.0, 1.0, 1.0], [1.0, 1.0, 1.0, 1.0]]), 2)


def verdict(rows, ins):
    out = torch.tensor(rows, dtype=torch.int32)
    return CHECK.verdict({"output_token_ids": out}, {"output_token_ids": out}, ins)


@pytest.mark.parametrize("rows, ok, words", [
    ([[1, 3, -1], [8, -1, -1]], True, ""),
    ([[1, 0, 7], [8, -1, -1]], False, "below the uniform"),           # the rejected draft accepted
    ([[1, 1, -1], [8, -1, -1]], False, "not the race winner"),        # resampled from the target
    ([[1, 3, 7], [8, -1, -1]], False, "placeholder"),                 # a token after the rejection
    ([[1, 3, -1], [-1, -1, -1]], False, "bonus token 8"),             # a request with no drafts
    ([[2, 3, -1], [8, -1, -1]], False, "reaches the uniform"),        # an accepted draft rejected
])
def test_replay(rows, ok, words):
    result = verdict(rows, inputs())
    assert result.ok is ok, result.message
    assert words in result.message


def test_an_acceptance_within_rounding_of_its_uniform_goes_either_way():
    ratio = float(torch.tensor(0.1) / torch.tensor(0.25))
    near = inputs(u1=ratio * (1 + 1e-7))     # a uniform within an fp32 rounding of the ratio
    assert verdict([[1, 0, 7], [8, -1, -1]], near).ok
    assert verdict([[1, 3, -1], [8, -1, -1]], near).ok
    far = inputs(u1=ratio * (1 + 1e-4))
    assert not verdict([[1, 0, 7], [8, -1, -1]], far).ok


def test_a_zero_draft_probability_always_rejects():
    ins = inputs(u1=0.0, p_draft_row1=[0.0, 0.4, 0.3, 0.3])   # the ratio would be infinite
    assert "race winner" in verdict([[1, 1, -1], [8, -1, -1]], ins).message
    # The residual (0.1, 0, 0, 0.1) over q (1, 2, 1, 1): the draft token 0 and token 3 tie for the
    # race; token 0 there is a rejection that resampled the draft token, then the placeholders.
    assert verdict([[1, 0, -1], [8, -1, -1]], ins).ok
    assert verdict([[1, 3, -1], [8, -1, -1]], ins).ok
    assert "placeholder" in verdict([[1, 0, 7], [8, -1, -1]], ins).message


def test_problem_refuses_a_float_output():
    assert CHECK.problem([Output("output_token_ids", torch.int32)]) is None
    assert "integer output" in CHECK.problem([Output("output_token_ids", torch.float32)])
