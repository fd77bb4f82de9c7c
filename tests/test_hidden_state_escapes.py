"""State across calls: module dunders and iterators, once the policy's [hidden-state]/[module-dunder] rules.

Each exploit keeps ``itertools.count()`` alive at module level as a call counter (hold-out round 4's
p04, which the iterator rule refuses at plain module level), is right for its first six calls (every
check of a CPU submission) and skips the work afterwards; before these fixes the policy accepted all
four and each earned the full reward on the interpreter. The exploits are tests/security/hidden_state/
(name_store_runs_main_block, main_guard_else_iterator, map_iter_as_value, tee_items: m01-m04),
evaluated by tests/test_security.py.

Since the trust boundary moved, state kept by the solution's Python changes nothing that is checked or
timed: the trusted replay runs the recorded launches on the secret inputs, and a forward whose
launches change from call to call fails [launch-contract]. So the policy leaves host code's dunders
and iterators alone (below: accepted); inside a kernel, which the replay runs, a dunder name or an
iterator is no part of Triton's language ([kernel-language]). The history of the rules:

- m01: ``__name__ = "__main__"`` made the ``if __name__ == "__main__":`` block, which the import-time
  rules skip because the worker never runs it, run at import. Any binding of a dunder name is now
  refused ([module-dunder]); with ``__name__`` fixed that block never runs, so skipping it stays safe.
- m02: the iterator rule skipped the whole ``if __name__ == "__main__":`` statement, its ``else:``
  branch too, which is what the worker does run. The else branch is scanned now (the call rule
  already scanned it). Plain for/while ``else:`` branches were scanned already (tested below).
- m03, m04: iterators made where the syntax shows no call (``map(iter, ...)``) or kept inside what a
  consumer read to the end (``tuple(itertools.tee(...))``). Iterator-making functions passed as
  values, tee and groupby, and iterator calls inside module-level lambdas are refused at import.
"""

from __future__ import annotations

import pytest

from d2k_env.evaluator.policy import check_solution

KERNEL = "import itertools\nimport torch\nimport triton\nimport triton.language as tl\n\n@triton.jit\ndef k(p):\n    pass\n\n"
FORWARD = "\ndef forward(x):\n    y = torch.empty_like(x)\n    k[(1,)](y)\n    return y\n"


def _rules(module_code: str, forward: str = FORWARD) -> list[str]:
    return [v.rule for v in check_solution(KERNEL + module_code + forward, frozenset({"empty", "empty_like"}))]


@pytest.mark.parametrize("code", [
    '__name__ = "__main__"\n',
    'for __name__ in ("__main__",):\n    pass\n',
    'if (__name__ := "__main__"):\n    pass\n',
    '__name__ += ""\n',
    'del __name__\n',
    'def __name__():\n    pass\n',
    '__spec__ = None\n',
    'X = [__name__ for __name__ in ("__main__",)]\n',
])
def test_binding_a_module_dunder_is_host_python(code):
    assert _rules(code) == []


@pytest.mark.parametrize("line", ["__name__ = 1", "v = __name__", "v = iter(range(3))", "v = tl.__name__"])
def test_dunders_and_iterators_in_a_kernel_are_not_the_language(line):
    kernel = f"@triton.jit\ndef k2(p):\n    {line}\n\n"
    assert set(_rules(kernel, FORWARD.replace("k[(1,)](y)", "k2[(1,)](y)"))) == {"kernel-language"}


@pytest.mark.parametrize("code", [
    'if __name__ == "__main__":\n    pass\nelse:\n    C = itertools.count()\n',
    'if __name__ == "__main__":\n    pass\nelif True:\n    C = iter(range(9))\n',
    'for _ in range(1):\n    pass\nelse:\n    C = itertools.count()\n',
    'while False:\n    pass\nelse:\n    C = itertools.cycle((1, 2))\n',
    'for C in map(iter, [range(9)]):\n    break\n',
    'for C in map(reversed, [range(9)]):\n    break\n',
    'MAKE = iter\n',
    'MAKE = itertools.count\n',
    'C, = tuple(itertools.tee(range(9), 1))\n',
    'G = tuple(itertools.groupby((1, 1, 2)))\n',
    'for C in map(lambda r: iter(r), [range(9)]):\n    break\n',
    'for C in [iter(range(9))]:\n    pass\n',
])
def test_module_level_iterators_are_host_python(code):
    assert _rules(code) == []


@pytest.mark.parametrize("code", [
    'CONFIGS = tuple(itertools.product((1, 2), (3, 4)))\n',
    'SIZES = list(map(int, ("1", "2")))\n',
    'PAIRS = tuple(zip((1, 2), (3, 4)))\n',
    'TOTAL = sum(x * x for x in range(4))\n',
    'for n in range(2):\n    pass\nelse:\n    LAST = 2\n',
    'ORDER = sorted((3, 1, 2), key=lambda v: -v)\n',
])
def test_module_level_values_from_iterators_are_allowed(code):
    assert _rules(code) == []


def test_a_main_block_is_still_allowed_to_run_host_code():
    # Never run in the worker (the module is named "solution" and __name__ cannot be rebound).
    assert _rules(FORWARD + '\nif __name__ == "__main__":\n    print(forward(torch.empty(8)))\n', "") == []
