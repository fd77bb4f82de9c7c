"""The Ray evaluation service on a local Ray cluster (``ray.init(num_cpus=2)``) with the interpreter:
verdicts right through the actors, envs sharing the service, a lost actor as an error step (never an
exception) followed by a good evaluation on its restart, and nothing left after close()."""

from __future__ import annotations

import os
import signal
import time

import gymnasium as gym
import pytest

import d2k_env
from d2k_env.service import EvalJob
from d2k_env.task import load_task

ray = pytest.importorskip("ray")
from d2k_env.service.ray_service import RayService  # noqa: E402 - after the skip

RMSNORM = "fused_add_rmsnorm"


@pytest.fixture(scope="module")
def cluster():
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield
    ray.shutdown()


def test_verdicts_come_back_through_the_actors(cluster):
    reference = load_task(RMSNORM).reference_path.read_text()
    service = RayService("interpreter", actors=1, jobs=2)
    try:
        good, bad = service.submit(EvalJob(RMSNORM, reference, "test", seed=5)), \
            service.submit(EvalJob(RMSNORM, "def forward(*inputs):\n    return inputs[0]\n", "test", seed=5))
        good, bad = good.result(timeout=900), bad.result(timeout=900)
        assert good.correct and not bad.correct
        assert good.queue["actor"] == 0 and good.queue["node"] and "waited_s" in good.queue
    finally:
        service.close()


def test_a_lost_actor_is_an_error_step_and_the_next_evaluation_succeeds(cluster):
    service = RayService("interpreter", actors=1, jobs=1)
    env = gym.make(d2k_env.env_id(RMSNORM), backend="interpreter", evaluator=service)
    try:
        env.reset(seed=0)
        env.step({"tool": "write_file", "args": {"path": "solution.py",
                                                  "content": load_task(RMSNORM).reference_path.read_text()}})
        assert env.step({"tool": "run_tests", "args": {}})[4]["evaluation"]["correct"]
        pid = ray.get(service._actors[0].pid.remote())
        # Killed while the next evaluation is in flight: its step reports the loss.
        future = service.submit(EvalJob(RMSNORM, load_task(RMSNORM).reference_path.read_text(), "submit", seed=1))
        time.sleep(0.3)
        os.kill(pid, signal.SIGKILL)
        lost = future.result(timeout=300)
        assert lost.error and "[service]" in lost.error and not lost.correct
        observation, reward, terminated, truncated, info = env.step({"tool": "run_tests", "args": {}})
        assert info["evaluation"]["correct"], observation  # Ray restarted the actor
    finally:
        env.close()
        service.close()


def _gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


def test_close_ends_the_actors(cluster):
    service = RayService("interpreter", actors=2, jobs=1)
    actors = list(service._actors)
    pids = ray.get([a.pid.remote() for a in actors])
    service.close()
    for actor in actors:
        with pytest.raises(ray.exceptions.RayActorError):
            ray.get(actor.pid.remote(), timeout=60)
    deadline = time.monotonic() + 60
    while not all(map(_gone, pids)) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert all(map(_gone, pids))
