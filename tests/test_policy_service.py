"""The policy runs in a child process with a time limit: no source holds the env's own process."""

import time

import pytest

from d2k_env.evaluator import policy, policy_service
from d2k_env.task import load_task

TASK = load_task("fused_add_rmsnorm")


def test_the_child_answers_as_the_policy_does():
    reference = TASK.reference_path.read_text()
    assert policy_service.check_solution(reference, TASK.allowed_torch) == []
    hostile = reference + "\nimport os\n"
    assert policy_service.check_solution(hostile, TASK.allowed_torch) == \
        policy.check_solution(hostile, TASK.allowed_torch) != []


def test_an_analysis_over_the_limit_is_refused_and_the_next_one_works(monkeypatch):
    source = TASK.reference_path.read_text()
    policy_service.check_solution(source, TASK.allowed_torch)  # a warm child: imports done
    monkeypatch.setattr(policy_service, "TIME_LIMIT_S", 1e-6)  # no analysis answers this fast
    started = time.monotonic()
    found = policy_service.check_solution(source * 20, TASK.allowed_torch)
    assert [v.rule for v in found] == ["policy-time"] and "longer than" in found[0].message, found
    assert time.monotonic() - started < 5
    monkeypatch.undo()
    assert policy_service.check_solution(source, TASK.allowed_torch) == []  # a fresh child


def test_a_child_that_died_is_replaced_by_the_next_call():
    service = policy_service._Service()
    service.check("x = 1\n", frozenset())
    service.proc.kill()  # the child dies between two analyses: the next call starts another
    service.proc.wait()
    assert [v.rule for v in service.check(TASK.reference_path.read_text(), TASK.allowed_torch)] == []
    service._stop()


def test_a_child_started_ahead_answers_the_first_check_and_is_not_doubled():
    service = policy_service._Service()
    service.start()  # returns at once: the child imports while its caller does something else
    child = service.proc
    assert child.poll() is None and service.fresh
    service.start()
    assert service.proc is child  # one runs: no second
    assert service.check(TASK.reference_path.read_text(), TASK.allowed_torch) == []
    assert service.proc is child and not service.fresh
    service._stop()
