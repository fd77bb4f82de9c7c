"""Async vector envs with every evaluator option (issue 26, item 1): the default (each env its own
service), a shared :class:`~d2k_env.service.LocalService` and a shared
:class:`~d2k_env.service.ray_service.RayService`, under the fork and the spawn context. Four envs
run an episode to ``submit`` on the interpreter, in a process of their own, so that a hang (the
children waited forever on a forked service's queue) fails the test at its time bound instead of
holding the suite. A shared service must have run every job in its own process's lanes.

The envs submit the stub, which the policy refuses before anything runs: what is tested is the
way there and back, not the kernel (tests/test_service.py checks the verdicts through processes).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import d2k_env

ROOT = Path(d2k_env.__file__).resolve().parents[1]
BOUND_S = 900  # generous: a loaded 2-core CI box; the failure this guards against is a hang

SCRIPT = textwrap.dedent("""
    import json, sys
    import gymnasium as gym
    import d2k_env
    from d2k_env.service import LocalService


    def main(context, kind):
        service = None
        if kind == "local":
            service = LocalService("interpreter", jobs=2)
        elif kind == "ray":
            import ray
            from d2k_env.service.ray_service import RayService
            ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
            service = RayService("interpreter", actors=1, jobs=2)
        kwargs = {} if service is None else {"evaluator": service}
        vec = gym.make_vec(d2k_env.env_id("fused_add_rmsnorm"), num_envs=4, vectorization_mode="async",
                           vector_kwargs={"context": context}, backend="interpreter", **kwargs)
        try:
            vec.reset(seed=[0, 1, 2, 3])
            _, rewards, terminated, truncated, infos = vec.step(({"tool": "submit", "args": {}},) * 4)
            errors = [str(e) for e in infos["evaluation"]["error"]]
            done = None
            if kind == "local":
                done = sum(lane["done"] for lane in service.stats()["lanes"])
            elif kind == "ray":
                done = sum(lane["done"] for actor in service.stats()["actors"] for lane in actor["lanes"])
        finally:
            vec.close()
            if service is not None:
                service.close()
        print(json.dumps({"rewards": rewards.tolist(), "terminated": terminated.tolist(),
                          "truncated": truncated.tolist(), "errors": errors, "done": done}))


    if __name__ == "__main__":
        main(*sys.argv[1:])
""")


def _episode(tmp_path: Path, context: str, kind: str) -> dict:
    script = tmp_path / "episode.py"
    script.write_text(SCRIPT)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    try:
        run = subprocess.run([sys.executable, str(script), context, kind], capture_output=True, text=True,
                             timeout=BOUND_S, env=env, cwd=tmp_path)
    except subprocess.TimeoutExpired:
        pytest.fail(f"4 async envs ({context}, {kind} service) did not reach submit within {BOUND_S} s: a hang")
    assert run.returncode == 0, run.stderr[-4000:]
    return json.loads(run.stdout.strip().splitlines()[-1])


def _check(outcome: dict, shared: bool) -> None:
    assert outcome["terminated"] == [True] * 4 and outcome["truncated"] == [False] * 4
    assert outcome["rewards"] == [0.0] * 4  # the stub, which defines no kernel
    assert len(outcome["errors"]) == 4  # the stub launches nothing: each workload's verdict is [no-kernel]
    if shared:  # every job ran in the lanes of the process that made the service
        assert outcome["done"] == 4


@pytest.mark.parametrize("context", ["fork", "spawn"])
@pytest.mark.parametrize("kind", ["default", "local"])
def test_four_async_envs_reach_submit(tmp_path, context, kind):
    _check(_episode(tmp_path, context, kind), shared=kind != "default")


@pytest.mark.parametrize("context", ["fork", "spawn"])
def test_four_async_envs_reach_submit_on_a_shared_ray_service(tmp_path, context):
    pytest.importorskip("ray")
    _check(_episode(tmp_path, context, "ray"), shared=True)
