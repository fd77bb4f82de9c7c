"""The order-free-within-segments checker (d2k_env.tasks.order_free), on moe_align_block_size: any
order of an expert's slots passes; a slot in another expert's range, padding before tokens, experts
laid out in another order, or a wrong block map fails."""

import importlib.util

import pytest
import torch

from d2k_env.task import load_task
from d2k_env.tasks import Output
from d2k_env.tasks.order_free import OrderFreeWithin

TASK = "moe_align_block_size"


@pytest.fixture(scope="module")
def align():
    task = load_task(TASK)
    spec = importlib.util.spec_from_file_location("align_baseline", task.baseline_path)
    baseline = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(baseline)
    inputs = task.make_inputs(task.workload("T4096_E128_k8_b64"), torch.Generator().manual_seed(2), torch.device("cpu"))
    return task, inputs, baseline.forward(*inputs), baseline


def check(task, inputs, outputs, expected):
    return task.checker(outputs, expected, inputs)


def test_any_order_within_each_expert_passes(align):
    task, inputs, expected, _ = align
    sorted_ids, expert_ids, total = expected
    shuffled = sorted_ids.clone()
    numel = inputs[0].numel()
    g = torch.Generator().manual_seed(0)
    for e in range(inputs[1]):
        blocks = (expert_ids == e).nonzero().flatten()
        if blocks.numel():
            span = torch.arange(blocks[0] * 64, (blocks[-1] + 1) * 64)
            tokens = span[sorted_ids[span] != numel]
            shuffled[tokens] = sorted_ids[tokens[torch.randperm(tokens.numel(), generator=g)]]
    assert not torch.equal(shuffled, sorted_ids)
    assert check(task, inputs, (shuffled, expert_ids, total), expected).ok


def test_a_slot_in_another_experts_range_fails(align):
    task, inputs, expected, _ = align
    sorted_ids = expected[0].clone()
    tokens = (sorted_ids != inputs[0].numel()).nonzero().flatten()
    sorted_ids[tokens[0]], sorted_ids[tokens[-1]] = expected[0][tokens[-1]], expected[0][tokens[0]]
    result = check(task, inputs, (sorted_ids,) + expected[1:], expected)
    assert not result.ok and "segments" in result.message


def test_padding_before_an_experts_tokens_fails(align):
    task, inputs, expected, _ = align
    sorted_ids = expected[0].clone()
    numel = inputs[0].numel()
    # Expert 0's range: rotate its padding to the front.
    n0 = int((expected[1] == expected[1][0]).sum()) * 64
    span = sorted_ids[:n0].clone()
    assert (span == numel).any()
    sorted_ids[:n0] = torch.roll(span, int((span == numel).sum()))
    result = check(task, inputs, (sorted_ids,) + expected[1:], expected)
    assert not result.ok and "fixed entries" in result.message


def test_experts_laid_out_in_another_order_fail(align):
    task, inputs, expected, baseline = align
    topk_ids, E, block = inputs
    # Relabel the experts in reverse, align, and map the labels back: a valid-looking layout with
    # the experts' ranges in descending order.
    rev = baseline.forward((E - 1 - topk_ids).contiguous(), E, block)
    expert_ids = torch.where(rev[1] >= 0, E - 1 - rev[1], rev[1])
    result = check(task, inputs, (rev[0], expert_ids, rev[2]), expected)
    assert not result.ok


def test_a_wrong_block_map_fails_and_is_named(align):
    task, inputs, expected, _ = align
    expert_ids = expected[1].clone()
    expert_ids[-1] = 0  # past the end: must stay -1
    result = check(task, inputs, (expected[0], expert_ids, expected[2]), expected)
    assert not result.ok and "expert_ids" in result.message


def test_problem_refuses_float_outputs_and_unknown_names():
    seg = lambda inputs, expected: None  # noqa: E731
    outs = [Output("a", torch.int32), Output("b", torch.float32)]
    assert OrderFreeWithin("a", seg, "s").problem(outs) is None
    assert "float" in OrderFreeWithin("b", seg, "s").problem(outs)
    assert "no output" in OrderFreeWithin("c", seg, "s").problem(outs)
