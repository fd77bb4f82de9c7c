"""The RoundingNoise checker (d2k_env.tasks.rounding_noise): the noise an honest tensor-core kernel
adds passes, a lower-precision computation of the same thing fails, and the spec refuses misuse."""

import pytest
import torch

from d2k_env.tasks import Output, PerOutput, RoundingNoise, Tolerance, noise_sigma


def softmax_average(s, v, round_weights, round_scores):
    """sum_j softmax(s)_j v_j per row (fp64), with the weights or the scores rounded to bf16 first."""
    if round_scores:
        s = s.to(torch.bfloat16).double()
    w = torch.exp(s - s.amax(-1, keepdim=True))
    num = (w.to(torch.bfloat16).double() if round_weights else w) @ v
    return num / w.sum(-1, keepdim=True)


def sigma_of(inputs):
    s, v = inputs
    w = torch.exp(s - s.amax(-1, keepdim=True))
    o = (w @ v / w.sum(-1, keepdim=True)).abs()
    w2 = w * w
    return noise_sigma(w2 @ (v * v) + 2 * o * (w2 @ v.abs()) + o * o * w2.sum(-1, keepdim=True), w.sum(-1, keepdim=True),
                       2.0 ** -8)


CHECK = RoundingNoise("o", sigma_of, 10, noise="the bf16 rounding of the weights", why="a test",
                      rest=PerOutput({"lse": Tolerance(1e-5, 1e-5)}))
OUTPUTS = [Output("o", torch.bfloat16), Output("lse", torch.float32)]


def case(seed, rows=256, n=2048, d=64):
    g = torch.Generator().manual_seed(seed)
    s = 3 * torch.randn(rows, n, generator=g, dtype=torch.float64)  # scores spread over several units
    v = torch.randn(n, d, generator=g, dtype=torch.float64)
    lse = torch.logsumexp(s, -1).float()
    expected = {"o": softmax_average(s, v, False, False).to(torch.bfloat16), "lse": lse}
    return (s, v), expected


@pytest.mark.parametrize("seed", range(3))
def test_rounded_weights_pass_and_rounded_scores_fail(seed):
    inputs, expected = case(seed)
    honest = {"o": softmax_average(*inputs, True, False).to(torch.bfloat16), "lse": expected["lse"]}
    assert CHECK.verdict(honest, expected, inputs).ok
    wrong = {"o": softmax_average(*inputs, True, True).to(torch.bfloat16), "lse": expected["lse"]}
    verdict = CHECK.verdict(wrong, expected, inputs)
    assert not verdict.ok and verdict.message.startswith("o: ")


def test_the_other_outputs_are_checked_by_rest():
    inputs, expected = case(1, rows=16, n=64)
    bad_lse = {"o": expected["o"], "lse": expected["lse"] + 1e-3}
    verdict = CHECK.verdict(bad_lse, expected, inputs)
    assert not verdict.ok and verdict.message.startswith("lse: ")


def test_nan_and_infinities_never_pass():
    inputs, expected = case(2, rows=16, n=64)
    for poison in (float("nan"), float("inf")):
        o = expected["o"].clone()
        o[3, 5] = poison
        assert not CHECK.verdict({"o": o, "lse": expected["lse"]}, expected, inputs).ok


def test_description_names_the_noise_and_the_rest():
    text = CHECK.describe(OUTPUTS)
    assert text.startswith("o: every element within one bfloat16 step of the expected value plus 10 standard "
                           "deviations of the bf16 rounding of the weights") and "lse: every element within 1e-05" in text
    assert text.endswith(".") and "NaN never passes" in text


@pytest.mark.parametrize("check, outputs, complaint", [
    (RoundingNoise("x", sigma_of, 10, "n", "w"), OUTPUTS, "is no output"),
    (RoundingNoise("lse", sigma_of, 10, "n", "w"), OUTPUTS, "not float32"),
    (RoundingNoise("o", sigma_of, 0, "n", "w"), OUTPUTS, "positive"),
    (RoundingNoise("o", sigma_of, 10, "n", "w", rest=PerOutput({"o": Tolerance(1, 1)})), OUTPUTS, "must not check"),
    (RoundingNoise("o", sigma_of, 10, "n", "w", rest=PerOutput({"y": Tolerance(1, 1)})), OUTPUTS, "no output"),
])
def test_misuse_is_named(check, outputs, complaint):
    assert complaint in check.problem(outputs)
