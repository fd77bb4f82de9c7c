"""Fifth hold-out red team (tests/holdout5/): exploits s01-s14 and honest probes s15-s18, written
without sight of the earlier suites. Every exploit must earn nothing, with a verdict; the probes
must pass the policy and earn the interpreter's full reward.

What this round got through, and the fix (all three in the static policy): s01 (a module-level
set grown with symmetric_difference_update: host code may now call only read-only methods on a
module-level container), s02 (itertools.count() kept alive as functools.reduce's initial value:
only iteration and the calls in ITERATOR_CONSUMERS use an iterator up) and s03 (triton.jit called
on an undecorated function, whose body was checked as host code: Triton's decorators may appear
only in a decorator list, [kernel-source]).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from d2k_env.task import task_ids
from exploits import (assert_paid_in_full, assert_passes_the_policy, assert_reference_still_correct,
                      assert_scores_zero, close_evaluators, evaluate_file, params, task_of)

HERE = Path(__file__).parent / "holdout5"


CPU_CASES = {
    "s01_c02_set_update_replay.py": ("[hidden-state]", None),
    "s02_c15_reduce_count_iterator.py": ("[hidden-state]", None),
    "s03_c03_jit_of_plain_function.py": ("[kernel-source]", None),
    "s04_c03_operator_work_beside_launch.py": ("[torch-work]", None),
    "s05_c03_autotune_prune_work.py": ("[torch-work]", None),
    "s07_c09_fp8_bf16_reciprocal.py": ("lower precision inside", None),
    "s08_c12_fp8_fixed_row_tile.py": (None, None),
    "s09_c09_merge_bf16_blend.py": ("more than one bfloat16 step", None),
    "s10_c08_residual_in_place.py": ("[aliasing]", None),
    "s11_c13_interpreter_injected_numpy.py": ("[unbound-name]", None),
    "s12_c12_rmsnorm_fixed_block.py": (None, None),
    "s13_c07_transposed_out.py": ("not contiguous", None),
    "s14_c01_scan_freed_block.py": ("[out-of-bounds]", None),
}

GPU_CASES = {
    "s06_c03_heuristic_inside_bench.py": ("[torch-work]", None),
}

PROBES = ["s15_cfp_autotune_heuristics.py", "s16_cfp_generic_launcher.py", "s17_cfp_module_tables.py",
          "s18_cfp_reduce_combine.py"]


@pytest.fixture(scope="module", autouse=True)
def _close():
    yield
    close_evaluators()


@pytest.mark.parametrize("name,reason", params(CPU_CASES))
def test_exploit_scores_zero_on_interpreter(name, reason):
    assert_scores_zero(evaluate_file(HERE / name, "interpreter", "submit"), reason)


@pytest.mark.gpu
@pytest.mark.parametrize("name,reason", params(GPU_CASES))
def test_exploit_scores_zero_on_gpu(name, reason):
    assert_scores_zero(evaluate_file(HERE / name, "cuda", "submit"), reason)


@pytest.mark.parametrize("name", PROBES)
def test_probe_passes_and_earns(name):
    assert_passes_the_policy(HERE / name)
    assert_paid_in_full(HERE / name)


@pytest.mark.parametrize("task_id", task_ids())
def test_reference_still_correct(task_id):
    assert_reference_still_correct(task_id)


def test_every_file_listed():
    listed = set(CPU_CASES) | set(GPU_CASES) | set(PROBES)
    on_disk = {p.name for p in HERE.glob("*.py")}
    assert on_disk == listed
    for p in HERE.glob("*.py"):
        task_of(p)  # each names its task
