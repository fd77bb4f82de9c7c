"""Row truncation on the interpreter: held-out shapes with many rows.

The interpreter's held-out shapes had at most 6 rows (RMSNorm), 40 tokens (merge) and 8 rows (fp8
quant), no more than the smoke workloads, so a kernel that handled only the first rows (r01-r03: a
grid of at most 40 rows, 40 tokens, 8 rows) passed every check of a CPU submission and earned the
full reward on all three tasks. Each task's first interpreter held-out shape now has 48 to 96 rows
(RMSNorm, fp8: six to twelve times the largest smoke workload) or 128 to 192 tokens of one head
(merge: more tokens and more (token, head) pairs than any smoke workload); narrow ones (N <= 256, one
head, one group), because the interpreter pays per program, about 20-40 ms each, and merge's second
shape has 12 tokens at most to pay for its first. The second shapes keep their guarantees (merge's
d = 256, fp8's 65-72 groups per row), and the GPU draws are unchanged. The exploits are
tests/security/row_truncation/, evaluated by tests/test_security.py; here the draws are checked.
"""

from __future__ import annotations

import pytest

from d2k_env.task import load_task

# The shipped tasks whose held-out draws this regression covers, and each one's row parameter (a
# task added later gets the generic checks of test_every_task and the row_truncation templates).
ROWS = {"fused_add_rmsnorm": "M", "merge_attn_states": "T", "per_token_group_quant_fp8": "M"}


@pytest.mark.parametrize("task_id", sorted(ROWS))
def test_interpreter_heldout_shapes_have_many_rows(task_id):
    task = load_task(task_id)
    rows = ROWS[task_id]
    smoke_rows = max(w.params[rows] for w in task.smoke_workloads)
    for seed in range(200):
        first, second = task.heldout_workloads(seed, smoke=True)
        assert first.params[rows] >= 3 * smoke_rows, first
        if task_id == "merge_attn_states":
            smoke_pairs = max(w.params["T"] * w.params["H"] for w in task.smoke_workloads)
            assert first.params["H"] == 1 and 128 <= first.params["T"] <= 192 and first.params["T"] > smoke_pairs
            assert second.params["d"] == 256 and second.params["T"] <= 12
        else:
            assert 48 <= first.params[rows] <= 96
        if task_id == "per_token_group_quant_fp8":
            assert 65 <= second.params["K"] // 128 <= 72 and first.params["K"] == 128


@pytest.mark.parametrize("task_id", sorted(ROWS))
def test_gpu_heldout_draws_keep_their_ranges(task_id):
    task = load_task(task_id)
    for seed in range(50):
        for w in task.heldout_workloads(seed, smoke=False):
            assert 1 <= w.params[ROWS[task_id]] <= 4096, w


def test_the_draws_vary_with_the_secret_seed():
    task = load_task("fused_add_rmsnorm")
    draws = {tuple(w.params.items()) for s in range(20) for w in task.heldout_workloads(s, smoke=True)}
    assert len(draws) >= 30  # two per seed, nearly always new
