"""The policy runs in a child process with a time limit: no source holds the env's own process."""

import threading
import time

import pytest

from d2k_env.evaluator import policy, policy_service
from d2k_env.task import load_task

TASK = load_task("fused_add_rmsnorm")


def test_the_child_answers_as_the_policy_does():
    reference = TASK.reference_path.read_text()
    assert policy_service.check_solution(reference, TASK.allowed_torch) == []
    hostile = reference + "\n\ndef _make():\n    @triton.jit\n    def inner(p):\n        pass\n"
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
    (child,) = service.idle
    child.proc.kill()  # the child dies between two analyses: the next call starts another
    child.proc.wait()
    assert [v.rule for v in service.check(TASK.reference_path.read_text(), TASK.allowed_torch)] == []
    assert service.idle[0] is not child
    service.stop()


def test_a_child_started_ahead_answers_the_first_check_and_is_not_doubled():
    service = policy_service._Service()
    service.start()  # returns at once: the child imports while its caller does something else
    (child,) = service.idle
    assert child.alive() and child.fresh
    service.start()
    assert service.idle == [child]  # one runs: no second
    assert service.check(TASK.reference_path.read_text(), TASK.allowed_torch) == []
    assert service.idle == [child] and not child.fresh
    service.stop()


def test_a_check_in_flight_holds_up_no_other(monkeypatch):
    # The red-team case: a source whose analysis runs to the time limit, then the child's restart,
    # made an honest check of another session wait 123 s. Here the first check's child is taken and
    # held (an analysis that does not answer); the second check must be answered all the same.
    monkeypatch.setattr(policy_service, "WAIT_S", 0.0)  # no wait for the busy child: deterministic
    service = policy_service._Service()
    service.check("x = 1\n", frozenset())  # a warm child
    held = service._take()  # a check in flight on the warm child
    try:
        assert service.busy == 1 and service.idle == []
        assert service.check(TASK.reference_path.read_text(), TASK.allowed_torch) == []  # a child of its own
        assert service.busy == 1 and len(service.idle) == 1 and service.idle[0] is not held
    finally:
        service._give_back(held, healthy=True)
    assert service.busy == 0 and len(service.idle) == 1 and not held.alive()  # one stays warm; one ended
    service.stop()


def test_a_check_waits_for_the_busy_child_rather_than_starting_one(monkeypatch):
    monkeypatch.setattr(policy_service, "WAIT_S", 600.0)  # far beyond the child's return, however loaded
    service = policy_service._Service()
    service.check("x = 1\n", frozenset())
    held = service._take()
    released = threading.Timer(0.2, service._give_back, (held, True))
    released.start()  # the busy child comes back while the check waits for it
    try:
        assert service.check(TASK.reference_path.read_text(), TASK.allowed_torch) == []
        assert service.idle == [held]  # it answered: no second child was started and kept
    finally:
        released.join()
        service.stop()


def test_after_a_time_out_a_replacement_starts_at_once(monkeypatch):
    service = policy_service._Service()
    service.check("x = 1\n", frozenset())
    (child,) = service.idle
    monkeypatch.setattr(policy_service, "TIME_LIMIT_S", 1e-6)
    assert [v.rule for v in service.check(TASK.reference_path.read_text() * 20, TASK.allowed_torch)] == ["policy-time"]
    (replacement,) = service.idle
    assert not child.alive() and replacement.alive() and replacement.fresh
    service.stop()
