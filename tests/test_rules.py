"""The rule registry: it names every rule the evaluator emits, its examples hold, and the verdict,
docs/security.md's capability table and the prompt read it."""

import ast
import re
from pathlib import Path

import pytest

from d2k_env.evaluator import Evaluator, rules
from d2k_env.evaluator.policy import check_solution
from d2k_env.prompt import CAPABILITIES, PROMPT_RULES
from d2k_env.task import load_task

EVALUATOR_DIR = Path(rules.__file__).parent
RULE_PREFIX = re.compile(r"\[([a-z][a-z0-9]*(?:-[a-z0-9]+)*)\]")
# The header over the policy's violations, each of which names its own rule.
NOT_RULES = {"policy"}
STATIC = [r for r in rules.RULES if rules.SOURCE in r.checked]


def _docstrings(tree: ast.AST) -> set[int]:
    """ids of the docstring nodes: they mention rules, they do not emit them."""
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                found.add(id(first.value))
    return found


def emitted_rules() -> dict[str, str]:
    """Every rule id the evaluator's sources can emit, with where: ``Violation("id", ...)`` and
    ``flag("id", ...)`` in the policy, and strings (f-strings too) that begin with ``[id]``."""
    found = {}
    for path in sorted(EVALUATOR_DIR.glob("*.py")):
        if path.name == "rules.py":
            continue
        tree = ast.parse(path.read_text())
        docstrings = _docstrings(tree)
        for node in ast.walk(tree):
            rule = None
            if isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant):
                name = node.func.id if isinstance(node.func, ast.Name) else getattr(node.func, "attr", "")
                if name in ("Violation", "flag"):
                    rule = node.args[0].value
            elif isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings:
                match = RULE_PREFIX.match(node.value)
                rule = match and match.group(1)
            if rule and rule not in NOT_RULES:
                found.setdefault(rule, f"{path.name}:{node.lineno}")
    return found


def test_every_emitted_rule_is_registered():
    missing = {rule: where for rule, where in emitted_rules().items() if rule not in rules.BY_ID}
    assert not missing, f"rules emitted but missing from d2k_env/evaluator/rules.py: {missing}"


def test_every_registered_rule_is_emitted():
    assert not set(rules.BY_ID) - set(emitted_rules()), "rules in the registry that nothing emits"


def test_registry_is_well_formed():
    assert len(rules.BY_ID) == len(rules.RULES), "a rule id is registered twice"
    for r in rules.RULES:
        assert r.threats and all(1 <= t <= 20 for t in r.threats), r.id
        assert r.checked and set(r.checked) <= {rules.SOURCE, rules.RUN, rules.LIMIT}, r.id
        assert r.refuses and r.instead.endswith(".") and r.refused and r.allowed, r.id


@pytest.mark.parametrize("rule", STATIC, ids=lambda r: r.id)
def test_static_rule_refuses_its_example(rule):
    violations = check_solution(rules.as_solution(rule.refused), rules.EXAMPLE_TORCH)
    assert {v.rule for v in violations} == {rule.id}, violations


@pytest.mark.parametrize("rule", rules.RULES, ids=lambda r: r.id)
def test_allowed_example_is_accepted(rule):
    assert check_solution(rules.as_solution(rule.allowed), rules.EXAMPLE_TORCH) == []


def test_policy_verdict_says_what_to_do_instead(tmp_path):
    # Two [kernel-language] violations and one [kernel-source]: each alternative once, after the violations.
    source = rules.SCAFFOLD + ("\n\n@triton.jit\ndef bad_kernel(x_ptr, n):\n    for i in (1, 2):\n        break\n\n\n"
                               "def forward(x):\n    @triton.jit\n    def inner(x_ptr):\n        pass\n\n"
                               "    return launch(x)\n")
    path = tmp_path / "solution.py"
    path.write_text(source)
    evaluator = Evaluator(load_task("fused_add_rmsnorm"), "interpreter")
    try:
        error = evaluator.evaluate(path).error
    finally:
        evaluator.close()
    assert error.startswith("[policy]") and error.count("[kernel-language] instead:") == 1, error
    assert error.count("[kernel-language] kernel bad_kernel") == 2, error
    for rule in ("kernel-language", "kernel-source"):
        assert f"[{rule}] instead: {rules.BY_ID[rule].instead}" in error
    assert error.index("instead:") > error.rindex("line ")


def test_security_doc_holds_the_rendered_table():
    text = rules.SECURITY_DOC.read_text()
    assert rules.doc_with_table(text) == text, "docs/security.md's table is stale: run python -m d2k_env.evaluator.rules"


def test_prompt_reads_the_registry():
    for rid in PROMPT_RULES:
        assert f"{rules.BY_ID[rid].refuses} [{rid}]" in CAPABILITIES
    # A few lines, not the whole table: the verdict explains the rest.
    assert len(CAPABILITIES.split()) < 200


def test_run_time_verdict_says_what_to_do_instead_once():
    from d2k_env.evaluator.protocol import EvalResult, WorkloadResult
    from d2k_env.verdict import format_result

    kept = "[late-corruption] outputs after the timed calls are not those of the checked call"
    result = EvalResult("test", "interpreter", workloads=[
        WorkloadResult("8x256", False, kept), WorkloadResult("5x200", False, kept),
        WorkloadResult("4x512", True, "ok")])
    text = format_result(result)
    assert text.count("[late-corruption] instead:") == 1, text
    assert f"[late-corruption] instead: {rules.BY_ID['late-corruption'].instead}" in text
    passed = format_result(EvalResult("test", "interpreter", workloads=[WorkloadResult("4x512", True, "ok")]))
    assert "instead:" not in passed
