"""Design properties (d2k_env.tasks.properties): the spec field's validation and each automatic
check, on facts built to satisfy or violate it."""

import pytest

from d2k_env.tasks.properties import (BytesNearRoofline, DesignProperty, Facts, MaxLaunches, NoLargeIntermediate,
                                      UsesDot, check_properties)
from d2k_env.task import load_task, task_ids
from d2k_env.tasks.spec import SpecError


def facts(launches=("k",), dot=(), buffers=(4096,), outputs=4096, moved=None):
    return Facts(tuple(launches), frozenset(dot), tuple(buffers), outputs, 8192, moved)


@pytest.mark.parametrize("check, good, bad", [
    (MaxLaunches(1), facts(), facts(launches=("k", "k2"))),
    (UsesDot(), facts(dot=("k",)), facts()),
    (NoLargeIntermediate(0.5), facts(buffers=(4096, 1024)), facts(buffers=(4096, 16384))),
    (BytesNearRoofline(1.2), facts(moved=10_000), facts(moved=20_000)),
])
def test_each_check_tells_realised_from_not(check, good, bad):
    assert check.finding(good, 10_000).status == "realised"
    assert check.finding(bad, 10_000).status == "not realised"
    assert check.describe()


def test_bytes_moved_are_unchecked_without_a_gpu_measurement():
    assert BytesNearRoofline(1.2).finding(facts(), 10_000).status == "unchecked"


def test_the_spec_field_needs_distinct_ids_and_every_layer():
    props = [DesignProperty("fused_add", "L1", "The add and the norm are one pass over the data"),
             DesignProperty("row_per_program", "L2", "Each program owns whole rows: no atomics"),
             DesignProperty("l2_eviction_hints", "L3", "The second pass re-reads the row from L2")]
    check_properties(props, SpecError)
    check_properties([], SpecError)  # a task may have none yet
    with pytest.raises(SpecError, match="distinct ids"):
        check_properties(props + [props[0]], SpecError)
    with pytest.raises(SpecError, match="none for L3"):
        check_properties(props[:2], SpecError)


@pytest.mark.parametrize("args, message", [
    (("Bad-Id", "L1", "a property text here"), "property id"),
    (("good_id", "L4", "a property text here"), "layer"),
    (("good_id", "L1", "short"), "one line"),
    (("good_id", "L1", "two\nlines of text"), "one line"),
])
def test_a_malformed_property_is_refused_with_a_reason(args, message):
    with pytest.raises(ValueError, match=message):
        DesignProperty(*args)


@pytest.mark.parametrize("task_id", task_ids())
def test_every_shipped_task_lists_properties_for_every_layer(task_id):
    """Issue 30: each task's design, layer by layer (the automatic checks' truth on the reference is
    the evaluator's test)."""
    props = load_task(task_id).spec.design_properties
    assert 3 <= len(props) <= 8, [p.id for p in props]
    assert {p.layer for p in props} == {"L1", "L2", "L3"}
