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

Later (issue 24) a grid of min(M, 96), the top of the published 48-96 range, was paid on every
submission, and a kernel wrong from 78 rows on on 5 of 8: the interpreter's row shapes now have 97 to
192 rows (193 to 256 tokens for merge, past its published 192), and every spec's draw must go past its workloads on every axis
(d2k_env/tasks/spec.py checks it at load; tests/security/shape_specialisation/ has the exploits).
"""

from __future__ import annotations

import pytest

from d2k_env.task import load_task

# The shipped tasks whose held-out draws this regression covers, and each one's row parameter (a
# task added later gets the generic checks of test_every_task and the row_truncation templates).
ROWS = {"fused_add_rmsnorm": "M", "merge_attn_states": "T", "per_token_group_quant_fp8": "M"}


# The constant a grid was capped at, read off the interpreter's held-out range as it was published.
PUBLISHED_TOP = 96


@pytest.mark.parametrize("task_id", sorted(ROWS))
def test_interpreter_heldout_shapes_have_many_rows(task_id):
    task = load_task(task_id)
    rows = ROWS[task_id]
    for seed in range(200):
        drawn = task.heldout_workloads(seed, smoke=True)
        first = drawn[0]
        assert first.params[rows] > PUBLISHED_TOP, first
        if task_id == "merge_attn_states":
            smoke_pairs = max(w.params["T"] * w.params["H"] for w in task.smoke_workloads)
            assert first.params["H"] == 1 and first.params["T"] > max(smoke_pairs, 192)
            assert drawn[1].params["d"] == 256 and drawn[1].params["T"] <= 8
        if task_id == "per_token_group_quant_fp8":
            assert first.params["K"] == 128 and drawn[1].params["K"] // 128 > 64


@pytest.mark.parametrize("task_id", sorted(ROWS))
def test_gpu_heldout_draws_have_more_rows_than_every_workload(task_id):
    task = load_task(task_id)
    rows = ROWS[task_id]
    for seed in range(50):
        assert max(w.params[rows] for w in task.heldout_workloads(seed, smoke=False)) > \
            max(w.params[rows] for w in task.workloads)


def test_the_draws_vary_with_the_secret_seed():
    task = load_task("fused_add_rmsnorm")
    draws = {tuple(w.params.items()) for s in range(20) for w in task.heldout_workloads(s, smoke=True)}
    assert len(draws) >= 50  # three per seed, nearly always new
