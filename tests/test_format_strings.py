"""Introspection through string formatting: once the policy's [format-string] rule, now the trust boundary's.

str.format and str.format_map read a field's attributes and items themselves: ``"{0.__class__}"``,
``"{0[0].gi_frame.f_back.f_locals[self]}"`` walk with getattr/getitem. f01 and f02 walked a generator's
running frame back to the harness's SolutionRun and printed the secret seed. Since the trust boundary
moved, the solution process holds no harness object, no seed and no checked input, so host code may
format as it likes (the exploits, tests/security/format_strings/, are evaluated end to end by
tests/test_security.py); inside a kernel, which the trusted replay runs, ``.format`` is no part of
Triton's language and is refused ([kernel-language]).
"""

from __future__ import annotations

import pytest

from d2k_env.evaluator.policy import check_solution

KERNEL = "import torch\nimport triton\nimport triton.language as tl\n\n@triton.jit\ndef k(p):\n    pass\n\n"


def _rules(line: str) -> list[str]:
    body = f"def forward(x):\n    y = torch.empty_like(x)\n    k[(1,)](y)\n    {line}\n    return y\n"
    return [v.rule for v in check_solution(KERNEL + body, frozenset({"empty_like"}))]


def _kernel_rules(line: str) -> list[str]:
    body = (f"@triton.jit\ndef k2(p, n):\n    {line}\n\n\n"
            "def forward(x):\n    y = torch.empty_like(x)\n    k2[(1,)](y, 1)\n    return y\n")
    return [v.rule for v in check_solution(KERNEL + body, frozenset({"empty_like"}))]


@pytest.mark.parametrize("line", [
    'print("{0.__class__.__mro__}".format(x))',
    'print("{0.shape}".format(x))',  # any attribute: the walk is the hole, not the name
    'print("{0[0]}".format([x]))',
    'print("{t[k]}".format_map({"t": {"k": x}}))',
    'print("{:{0.ndim}}".format(1, x))',  # a nested field in a format spec
    'print("{0:>{1[0]}}".format(1, [3]))',
    'print(str.format("{0.__class__}", x))',
    'print(("{0." + "__class__}").format(x))',
    'f = "{0." + "__class__}"\n    print(f.format(x))',
    'print(f"{{0.__class__}}".format(x))',  # an f-string that makes a format string
    'fmt = "{0.__class__}".format\n    print(fmt(x))',
    'print("{0.__class__".format(x))',  # malformed: refused rather than guessed at
])
def test_format_fields_that_walk_are_host_python(line):
    assert _rules(line) == []


@pytest.mark.parametrize("line", [
    'print("{0.__class__.__mro__}".format(p))',
    'v = "{0[0]}".format_map(n)',
    'v = str.format("{0.__class__}", p)',
])
def test_format_in_a_kernel_is_not_the_language(line):
    assert set(_kernel_rules(line)) == {"kernel-language"}


@pytest.mark.parametrize("line", [
    'print("{} x {}".format(x.shape[0], x.shape[1]))',
    'print("{n:>8} {m!r} {:.3f}".format(1.5, n=2, m="a"))',
    'print("{:{w}}".format(1, w=4))',
    'print("{0}{1}{0}".format("a", "b"))',
    'print(f"{x.shape[0]:>{x.ndim}}")',
    'print("%d rows" % x.shape[0])',
    'print(format(x.shape[0], ">8"))',
])
def test_plain_formatting_is_allowed(line):
    assert _rules(line) == []
