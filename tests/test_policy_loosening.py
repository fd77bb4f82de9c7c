"""Exploits of the forms the policy stopped refusing for honest kernels (tests/policy_loosening/).

Issue 11 loosened five rules so that honest code is paid: ``forward = my_op``, ``kernel = _k;
kernel[grid](...)``, an ``if __name__ == "__main__":`` self-test, ``try: <imports> except ImportError:``
at module level, and kernel defaults read off a module-level ``torch.finfo`` (``fp8_info.max``). Each file
here reuses one of those forms the way an exploit would, and must score 0 with the rule named:

- l01: ``forward`` aliases a def whose name is bound again further down ([no-kernel]: forward, and the
  def it names, are bound once at module level).
- l02: a kernel alias reaches the kernel's own API (a pre-run hook, which runs inside the launch)
  ([introspection]: an alias gets a kernel's attribute rules).
- l03: the self-test block imports ``inspect``, which Triton's interpreter would then fill into the
  module ([unbound-name]: nothing the block binds counts as bound).
- l04: an import that always fails, with ``torch`` as the fallback ([torch-work]: each branch is checked).
- l05: the whole finfo object as a kernel's constexpr ([torch-work]: only its numbers are constants).

Behind the policy (bypassed here on purpose), the run-time checks stop l01, l02 and l04 too; l03 and
l05 compute correct outputs there and are paid, so the policy's rule is what stops them on the CPU.
"""

from __future__ import annotations

from pathlib import Path

import pytest

import d2k_env.evaluator
from d2k_env.evaluator.policy import check_solution
from d2k_env.reward import submission_reward
from d2k_env.task import load_task
from d2k_env.verdict import format_result
from exploits import assert_scores_zero, close_evaluators, evaluate_file, params, task_of

HERE = Path(__file__).parent / "policy_loosening"

CPU_CASES = {
    "l01_c01_forward_alias_to_earlier_def.py": ("[no-kernel]", None),
    "l02_c03_kernel_alias_pre_run_hook.py": ("[introspection]", None),
    "l03_c06_main_block_imports_inspect.py": ("[unbound-name]", None),
    "l04_c03_import_fallback_to_torch.py": ("[torch-work]", None),
    "l05_c03_finfo_object_as_constexpr.py": ("[torch-work]", None),
}

# With the static policy bypassed: the run-time verdict, or None where the exploit is then paid.
BEHIND_THE_POLICY = {
    "l01_c01_forward_alias_to_earlier_def.py": "[no-kernel]",
    "l02_c03_kernel_alias_pre_run_hook.py": "[torch-work]",
    "l03_c06_main_block_imports_inspect.py": None,
    "l04_c03_import_fallback_to_torch.py": "[torch-work]",
    "l05_c03_finfo_object_as_constexpr.py": None,
}


@pytest.fixture(scope="module", autouse=True)
def _close():
    yield
    close_evaluators()


def test_every_file_listed():
    assert {p.name for p in HERE.glob("*.py")} == set(CPU_CASES) == set(BEHIND_THE_POLICY)


@pytest.mark.parametrize("name,reason", params(CPU_CASES))
def test_the_policy_names_the_rule(name, reason):
    path = HERE / name
    found = {f"[{v.rule}]" for v in check_solution(path.read_text(), load_task(task_of(path)).allowed_torch)}
    assert found == {reason}, found


@pytest.mark.parametrize("name,reason", params(CPU_CASES))
def test_exploit_scores_zero_on_interpreter(name, reason):
    assert_scores_zero(evaluate_file(HERE / name, "interpreter", "submit"), reason)


@pytest.mark.parametrize("name", sorted(BEHIND_THE_POLICY))
def test_behind_a_bypassed_policy(name, monkeypatch):
    monkeypatch.setattr(d2k_env.evaluator, "check_solution", lambda *args, **kwargs: [])
    result = evaluate_file(HERE / name, "interpreter", "submit")
    if BEHIND_THE_POLICY[name] is None:
        assert result.correct and submission_reward("speedup", result) == 1.0, format_result(result)
    else:
        assert_scores_zero(result, BEHIND_THE_POLICY[name])
