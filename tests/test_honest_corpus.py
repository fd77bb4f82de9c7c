"""The honest corpus: today's outcome of every file, pinned, so that any change to it shows up.

tests/honest/<task>/<idiom>.py are honest, numerically correct solutions, one idiom each (typing,
dataclasses, logging, lru_cache, autotune, libdevice, ...); tests/honest_refused/<task>__<capability>__
<what>.py are honest kernels that use a capability a solution must not have (files, the environment,
threads, processes, the interpreter's state). benchmarks/honest_corpus.py measures them all and
writes the table (benchmarks/results/honest-corpus-<date>.md).

MANIFEST states each file's outcome today, in one of three forms:

- ``"paid"``: the policy accepts it, and a full interpreter submit is correct and earns 1.0;
- ``"refused: [rule] [rule]"``: the static policy refuses it with exactly these rules;
- ``"fails on interpreter: <text>"``: the policy accepts it, the submit fails, and the failure says <text>.

The test asserts the actual outcome equals the manifest: a policy change that newly accepts (or
refuses) a file fails here until the manifest says so. The policy is being loosened (issue 11); after
a change, ``python benchmarks/honest_corpus.py --manifest`` prints today's lines to paste below.
Refused files are checked with the policy alone (milliseconds); only files expected to be paid or to
fail are submitted (about 13 s each on an idle machine, several at once; seeds fixed per file as in
the benchmark).
"""

from __future__ import annotations

import ast
import os
import zlib
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from d2k_env.evaluator import Evaluator
from d2k_env.evaluator.policy import check_solution
from d2k_env.reward import submission_reward
from d2k_env.task import load_task, task_ids
from d2k_env.verdict import format_result

TESTS = Path(__file__).resolve().parent
HONEST = TESTS / "honest"
REFUSED = TESTS / "honest_refused"
JOBS = max(2, min(8, os.cpu_count() or 2))  # concurrent submissions

MANIFEST = {
    "honest/fused_add_rmsnorm/autotune_several_configs.py": "paid",
    "honest/fused_add_rmsnorm/bool_flag_in_if.py": "paid",
    "honest/fused_add_rmsnorm/empty_input_early_return.py": "paid",
    "honest/fused_add_rmsnorm/forward_alias.py": "paid",
    "honest/fused_add_rmsnorm/frozen_dataclass_launch_params.py": "paid",
    "honest/fused_add_rmsnorm/heuristics_block_and_even.py": "paid",
    "honest/fused_add_rmsnorm/libdevice_rsqrt_by_name.py": "paid",
    "honest/fused_add_rmsnorm/logging_debug.py": "paid",
    "honest/fused_add_rmsnorm/lru_cache_config_picker.py": "paid",
    "honest/fused_add_rmsnorm/main_self_test.py": "paid",
    "honest/fused_add_rmsnorm/module_dict_block_cache.py": "paid",
    "honest/fused_add_rmsnorm/no_grad_decorator.py": "paid",
    "honest/fused_add_rmsnorm/persistent_row_loop.py": "paid",
    "honest/fused_add_rmsnorm/stride_generic.py": "paid",
    "honest/fused_add_rmsnorm/torch_cuda_device_context.py": "paid",
    "honest/fused_add_rmsnorm/two_kernels_stats_then_apply.py": "paid",
    "honest/fused_add_rmsnorm/typing_annotations.py": "paid",
    "honest/merge_attn_states/autotune_configs_from_helper.py": "paid",
    "honest/merge_attn_states/constexpr_module_constants_exp2.py": "paid",
    "honest/merge_attn_states/device_type_and_index.py": "paid",
    "honest/merge_attn_states/dunder_all_exports.py": "paid",
    "honest/merge_attn_states/empty_tokens_early_return.py": "paid",
    "honest/merge_attn_states/kernel_variable_alias.py": "paid",
    "honest/merge_attn_states/lambda_grid.py": "paid",
    "honest/merge_attn_states/math_prod_flatten.py": "paid",
    "honest/merge_attn_states/namedtuple_launch_params.py": "paid",
    "honest/merge_attn_states/stride_generic_all_tensors.py": "paid",
    "honest/merge_attn_states/torch_version_cuda_check.py": "paid",
    "honest/merge_attn_states/try_except_importerror.py": "paid",
    "honest/merge_attn_states/warnings_warn.py": "paid",
    "honest/per_token_group_quant_fp8/autotune_with_prune_hook.py": "paid",
    "honest/per_token_group_quant_fp8/bool_scale_ue8m0_flag.py": "paid",
    "honest/per_token_group_quant_fp8/constexpr_module_constants.py": "paid",
    "honest/per_token_group_quant_fp8/device_capability_check.py": "paid",
    "honest/per_token_group_quant_fp8/empty_rows_early_return.py": "paid",
    "honest/per_token_group_quant_fp8/finfo_constexpr_default.py": "paid",
    "honest/per_token_group_quant_fp8/frozen_dataclass_quant_config.py": "paid",
    "honest/per_token_group_quant_fp8/getattr_device_properties.py": "paid",
    "honest/per_token_group_quant_fp8/logging_is_enabled_for.py": "paid",
    "honest/per_token_group_quant_fp8/noop_to_dtype.py": "paid",
    "honest/per_token_group_quant_fp8/sm_count_cache_by_device.py": "paid",
    "honest/per_token_group_quant_fp8/stride_generic_scales.py": "paid",
    "honest/per_token_group_quant_fp8/two_kernels_scales_then_quant.py": "paid",
    "honest/per_token_group_quant_fp8/typing_final_and_dict.py": "paid",
}

# Capabilities a solution must not have: each file here must stay refused, whatever else changes.
REFUSED_MANIFEST = {
    "honest_refused/fused_add_rmsnorm__files__tuned_config_json.py": "refused: [forbidden-import] [hidden-state] [introspection]",
    "honest_refused/fused_add_rmsnorm__interpreter_state__sys_modules.py": "refused: [forbidden-import] [introspection]",
    "honest_refused/merge_attn_states__environment__os_environ_block.py": "refused: [forbidden-import] [hidden-state]",
    "honest_refused/per_token_group_quant_fp8__processes__nvidia_smi_sm_count.py": "refused: [forbidden-import] [try-except]",
    "honest_refused/per_token_group_quant_fp8__threads__background_warmup.py": "refused: [forbidden-import] [hidden-state]",
}


def task_of(name: str) -> str:
    """honest/<task>/x.py or honest_refused/<task>__<capability>__x.py -> <task>."""
    parts = name.split("/")
    return parts[1] if parts[0] == "honest" else parts[1].split("__")[0]


def corpus_names() -> list[str]:
    names = [f"honest/{p.parent.name}/{p.name}" for p in sorted(HONEST.glob("*/*.py"))]
    return names + [f"honest_refused/{p.name}" for p in sorted(REFUSED.glob("*.py"))]


def policy_outcome(name: str) -> str | None:
    """"refused: [rule] ..." when the static policy refuses the file, else None."""
    violations = check_solution((TESTS / name).read_text(), load_task(task_of(name)).allowed_torch)
    return "refused: " + " ".join(f"[{r}]" for r in sorted({v.rule for v in violations})) if violations else None


_EVALUATORS: dict[str, Evaluator] = {}


@pytest.fixture(scope="module", autouse=True)
def _close_evaluators():
    yield
    for ev in _EVALUATORS.values():
        ev.close()
    _EVALUATORS.clear()


def submit(name: str):
    # The benchmark's seeds (benchmarks/honest_corpus.py, seed_for): fixed per file.
    return _EVALUATORS[task_of(name)].evaluate(TESTS / name, "submit", seed=zlib.crc32(name.encode()))


@pytest.fixture(scope="module")
def submissions(request) -> dict:
    """Interpreter submissions of the selected files that the policy lets run, made concurrently (each is
    two child processes, mostly start-up time) the first time a test needs one."""
    selected = {item.callspec.params["name"] for item in request.session.items
                if item.originalname == "test_honest_file_outcome_matches_the_manifest"}
    names = [n for n in sorted(selected) if not MANIFEST[n].startswith("refused: ") and policy_outcome(n) is None]
    for task in {task_of(n) for n in names} - set(_EVALUATORS):
        _EVALUATORS[task] = Evaluator(load_task(task), backend="interpreter")
    with ThreadPoolExecutor(max_workers=JOBS) as pool:
        return dict(zip(names, pool.map(submit, names)))


def test_the_manifest_covers_the_corpus_exactly():
    assert sorted({**MANIFEST, **REFUSED_MANIFEST}) == corpus_names()
    assert all(name.startswith("honest/") for name in MANIFEST)
    assert all(name.startswith("honest_refused/") for name in REFUSED_MANIFEST)


def test_the_corpus_is_large_and_spread_over_every_task():
    per_task = {t: sum(task_of(n) == t for n in MANIFEST) for t in task_ids()}
    assert len(MANIFEST) >= 40 and min(per_task.values()) >= 10, per_task
    assert 3 <= len(REFUSED_MANIFEST) <= 6


@pytest.mark.parametrize("name", corpus_names(), ids=lambda n: n.split("/", 1)[1][:-3])
def test_each_file_says_its_idiom_and_is_a_solution(name):
    """A one-line docstring naming the idiom (or the capability), a forward, and a kernel of its own."""
    tree = ast.parse((TESTS / name).read_text())
    doc = ast.get_docstring(tree)
    assert doc and "\n" not in doc and doc.startswith("Idiom: " if name.startswith("honest/") else "Capability: ")
    top = {n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.ClassDef))} | {
        t.id for n in tree.body if isinstance(n, ast.Assign) for t in n.targets if isinstance(t, ast.Name)}
    assert "forward" in top
    assert any(isinstance(d, ast.Attribute) and d.attr == "jit" for n in ast.walk(tree)
               if isinstance(n, ast.FunctionDef) for d in n.decorator_list)


@pytest.mark.parametrize("name", sorted(MANIFEST), ids=lambda n: n.split("/", 1)[1][:-3])
def test_honest_file_outcome_matches_the_manifest(name, request):
    expected = MANIFEST[name]
    refused = policy_outcome(name)
    if expected.startswith("refused: ") or refused:
        assert refused == expected, f"{name}: the policy now says {refused or 'nothing'}; update MANIFEST"
        return
    result = request.getfixturevalue("submissions")[name]
    if expected == "paid":
        assert result.correct, format_result(result)
        assert submission_reward("speedup", result) == 1.0, format_result(result)
    else:
        assert expected.startswith("fails on interpreter: "), expected
        assert not result.correct, f"{name} is now paid; update MANIFEST"
        why = expected.removeprefix("fails on interpreter: ")
        assert why in format_result(result), format_result(result)


@pytest.mark.parametrize("name", sorted(REFUSED_MANIFEST), ids=lambda n: n.split("/", 1)[1][:-3])
def test_capability_file_stays_refused(name):
    refused = policy_outcome(name)
    assert refused is not None, f"{name} uses a capability ({name.split('__')[1]}) and must stay refused"
    assert refused == REFUSED_MANIFEST[name], f"{name}: the policy now says {refused}; update REFUSED_MANIFEST"
