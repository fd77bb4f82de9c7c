"""The top-k selection checker (d2k_env.tasks.topk_sets): every legal choice among ties passes, and
what a wrong router does (a tie taken twice, groups ignored, a beaten candidate, weights of the bias
or out of place) fails. On the grouped router task's own inputs and on small hand-made rows."""

import importlib.util

import pytest
import torch

from d2k_env.task import load_task
from d2k_env.tasks import Output, Tolerance
from d2k_env.tasks.topk_sets import TopKSelection, is_grouped_top_k, is_top_k

TASK = "moe_grouped_topk_router"


def _baseline():
    task = load_task(TASK)
    spec = importlib.util.spec_from_file_location("router_baseline", task.baseline_path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return task, module


@pytest.fixture(scope="module")
def router():
    task, baseline = _baseline()
    inputs = task.make_inputs(task.workload("T4096"), torch.Generator().manual_seed(3), torch.device("cpu"))
    return task, inputs, baseline.forward(*inputs)


def verdict(task, inputs, weights, ids):
    return task.checker((weights, ids), (weights, ids), inputs)


def test_is_top_k_accepts_any_choice_among_ties_and_no_beaten_candidate():
    keys = torch.tensor([[5.0, 3.0, 3.0, 1.0]])
    assert is_top_k(keys, torch.tensor([[0, 1]]), 0.0).item()
    assert is_top_k(keys, torch.tensor([[2, 0]]), 0.0).item()  # the other tied one, in any order
    assert not is_top_k(keys, torch.tensor([[0, 3]]), 0.0).item()  # 1 beaten by 3
    assert is_top_k(torch.tensor([[5.0, 3.0, 3.0 + 1e-9, 1.0]]), torch.tensor([[0, 1]]), 1e-6).item()


def test_is_grouped_top_k_on_hand_made_rows():
    # 4 groups of 2, keep 2 groups, choose 2: group scores (sum of the best 1) 9, 4, 4, 1.
    keys = torch.tensor([[9.0, 0.0, 4.0, 3.5, 4.0, 2.0, 1.0, 0.0]])
    check = lambda ids: is_grouped_top_k(keys, torch.tensor([ids]), 4, 2, 1, 0.0).item()  # noqa: E731
    assert check([0, 2]) and check([2, 0])
    assert check([0, 4])           # groups 1 and 2 tie: either may be kept
    assert not check([2, 4])       # group 0 beats both and must be kept: 9 passed over
    assert not check([0, 6])       # group 3 is below the cut
    assert not check([0, 5])       # group 2 kept, but 2.0 chosen over its own 4.0
    assert not check([2, 3])       # group 0 kept (it must be), its 9 passed over for 3.5
    # Three tied groups for one place: chosen ids in one of them are legal whichever is taken.
    keys3 = torch.tensor([[9.0, 0.0, 4.0, 0.0, 4.0, 0.0, 4.0, 0.0]])
    assert is_grouped_top_k(keys3, torch.tensor([[0, 6]]), 4, 2, 1, 0.0).item()
    assert not is_grouped_top_k(keys3, torch.tensor([[2, 6]]), 4, 2, 1, 0.0).item()  # three groups


def test_the_baseline_and_any_order_pass(router):
    task, inputs, (weights, ids) = router
    assert verdict(task, inputs, weights, ids).ok
    perm = torch.randperm(ids.shape[1], generator=torch.Generator().manual_seed(0))
    assert verdict(task, inputs, weights[:, perm], ids[:, perm]).ok


def test_the_other_choice_at_a_tie_passes_with_its_own_weights(router):
    task, inputs, (weights, ids) = router
    logits, bias = inputs
    keys = torch.sigmoid(logits.double()) + bias.double()
    ids2 = ids.clone().long()
    swapped = 0
    for row in range(ids.shape[0]):
        chosen = set(ids2[row].tolist())
        j = int(keys[row, ids2[row]].argmin())
        low = keys[row, ids2[row, j]]
        group = ids2[row] // 32
        # An unchosen expert of a kept group with exactly the smallest chosen key: the other legal pick.
        for e in range(256):
            if e not in chosen and keys[row, e] == low and bool((group == e // 32).any()):
                ids2[row, j] = e
                swapped += 1
                break
    assert swapped > 50
    s = torch.sigmoid(logits.double()).gather(1, ids2)
    w2 = (s / s.sum(-1, keepdim=True) * 2.5).float()
    assert verdict(task, inputs, w2, ids2.int()).ok


def test_a_tie_taken_twice_fails(router):
    task, inputs, (weights, ids) = router
    bad = ids.clone()
    bad[5, 1] = bad[5, 0]
    result = verdict(task, inputs, weights, bad)
    assert not result.ok and "twice" in result.message


def test_ignoring_the_groups_fails(router):
    task, inputs, (weights, ids) = router
    logits, bias = inputs
    scores = logits.sigmoid()
    plain = (scores + bias).topk(8, dim=-1).indices
    w = scores.gather(1, plain)
    result = verdict(task, inputs, w / w.sum(-1, keepdim=True) * 2.5, plain.int())
    assert not result.ok and "not a valid selection" in result.message


def test_a_beaten_candidate_fails(router):
    task, inputs, (weights, ids) = router
    keys = torch.sigmoid(inputs[0].double()) + inputs[1].double()
    bad = ids.clone().long()
    row = 0
    worst = keys[row].clone()
    worst[bad[row]] = float("inf")
    bad[row, 0] = int(worst.argmin())  # the row's lowest key, certainly beaten
    result = verdict(task, inputs, weights, bad.int())
    assert not result.ok and "1 of 4096 rows" in result.message


def test_weights_of_biased_scores_or_out_of_place_fail(router):
    task, inputs, (weights, ids) = router
    logits, bias = inputs
    biased = (logits.sigmoid() + bias).gather(1, ids.long())
    assert not verdict(task, inputs, biased / biased.sum(-1, keepdim=True) * 2.5, ids).ok
    assert not verdict(task, inputs, weights.flip(-1), ids).ok  # ids kept in place, weights reversed
    assert not verdict(task, inputs, weights * (1 + 1e-4), ids).ok


def test_out_of_range_ids_fail(router):
    task, inputs, (weights, ids) = router
    bad = ids.clone()
    bad[2, 3] = 256
    result = verdict(task, inputs, weights, bad)
    assert not result.ok and "outside" in result.message


def test_problem_names_a_misconfigured_checker():
    common = dict(n_candidates=lambda i: 4, valid=lambda i, ids: torch.ones(len(ids), dtype=torch.bool), rule="r")
    outs = [Output("w", torch.float32), Output("i", torch.int32)]
    assert TopKSelection(ids="i", weights="w", weights_of=lambda i, ids: None, **common).problem(outs) is None
    assert "integer" in TopKSelection(ids="w", weights="i", weights_of=lambda i, ids: None, **common).problem(outs)
    assert "neither" in TopKSelection(ids="i", **common).problem(outs)
    assert "together" in TopKSelection(ids="i", weights="w", **common).problem(outs)
    assert "float" in TopKSelection(ids="i", weights="w", weights_of=lambda i, ids: None,
                                    weight_check=Tolerance(0, 0), **common).problem(
        [Output("w", torch.int32), Output("i", torch.int32)])
