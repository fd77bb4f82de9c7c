"""Play one episode against a served kernel task over OpenEnv's WebSocket protocol.

Needs the ``openenv`` extra, checked before anything runs. Start a server (or the image of
deploy/openenv.Dockerfile), then run the client:

    pip install -e ".[openenv]"
    python -m d2k_env.integrations.openenv --port 8000 --backend interpreter &
    python examples/openenv_client.py --url http://127.0.0.1:8000 --task fused_add_rmsnorm

The scripted agent reads the baseline, writes the expert reference as its solution, runs the
tests and submits; a learning agent would choose these actions itself. ``--sessions N`` plays N
episodes at once, each in its own session (the server allows 8 by default). The exit status is 1
when an episode failed.
"""

from __future__ import annotations

import argparse
import asyncio

from d2k_env.extras import require

require("openenv")
from d2k_env.integrations.openenv import KernelAction, KernelEnvClient  # noqa: E402 (after the check)
from d2k_env.task import load_task  # noqa: E402


async def episode(url: str, task: str, seed: int) -> float:
    reference = load_task(task).reference_path.read_text()
    async with KernelEnvClient(base_url=url, message_timeout_s=600) as env:
        result = await env.reset(task=task, guidance="L1", seed=seed)
        print(f"[{seed}] prompt: {len(result.observation.text)} characters")
        for action in (KernelAction(tool="read_file", args={"path": "baseline.py"}),
                       KernelAction(tool="write_file", args={"path": "solution.py", "content": reference}),
                       KernelAction(tool="run_tests"),
                       KernelAction(tool="submit")):
            result = await env.step(action)
            print(f"[{seed}] {action.tool}: {result.observation.text.splitlines()[0]}")
        return result.reward or 0.0


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--url", default="http://127.0.0.1:8000")
    parser.add_argument("--task", default="fused_add_rmsnorm")
    parser.add_argument("--sessions", type=int, default=1)
    args = parser.parse_args()
    rewards = await asyncio.gather(*(episode(args.url, args.task, seed) for seed in range(args.sessions)))
    print("rewards:", rewards)


if __name__ == "__main__":
    asyncio.run(main())
