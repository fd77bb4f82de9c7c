"""Evaluate a served chat model on kernel tasks with verifiers' rollout loop.

Any OpenAI-compatible server works (vLLM, SGLang, a hosted API); the model answers in text with one
JSON tool call per reply, and the env's reward is the rubric's ``kernel_reward``:

    pip install -e ".[verifiers]"      # Python 3.11+; verifiers' chat harness also needs uv on PATH
    export OPENAI_API_KEY=...          # read through --api-key-var
    python examples/verifiers_eval.py --base-url http://localhost:8000/v1 --model Qwen/Qwen3-8B \\
        --tasks fused_add_rmsnorm --guidance none L1+L2+L3 --seeds 0 1

Each episode prints its task, guidance, seed, reward and env steps; the exit status is 1 when every
episode failed. The extra is checked before anything runs.
"""

from __future__ import annotations

import argparse
import asyncio
import sys

from d2k_env.extras import require

require("verifiers")
import verifiers.v1 as vf  # noqa: E402 (after the check)

from d2k_env.integrations.common import GUIDANCE_CONDITIONS  # noqa: E402
from d2k_env.integrations.verifiers import load_environment  # noqa: E402


async def evaluate(args: argparse.Namespace) -> list[bool]:
    """Whether each episode ran to its end (whatever its reward)."""
    env = load_environment(tasks=args.tasks, guidance=args.guidance, seeds=args.seeds, backend=args.backend,
                           max_steps=args.max_steps)
    ctx = vf.ModelContext(model=args.model,
                          client=vf.EvalClientConfig(base_url=args.base_url, api_key_var=args.api_key_var))
    gate = asyncio.Semaphore(args.concurrency)

    async def one(task) -> bool:
        async with gate:
            episode = await env.run_episode(task, ctx)
        for trace in episode.traces:
            outcome = trace.info.get("d2k", {})
            print(f"{task.data.name}: reward {trace.reward:.4f}, {outcome.get('steps', 0)} env steps"
                  + ("" if episode.ok else f", failed: {episode.errors or trace.errors}"))
        return bool(episode.ok)

    async with env.serving():
        return await asyncio.gather(*(one(task) for task in env.taskset))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--base-url", required=True)
    parser.add_argument("--model", required=True)
    parser.add_argument("--api-key-var", default="OPENAI_API_KEY")
    parser.add_argument("--tasks", nargs="+", default=None, help="default: every registered task")
    parser.add_argument("--guidance", nargs="+", default=list(GUIDANCE_CONDITIONS))
    parser.add_argument("--seeds", nargs="+", type=int, default=[0])
    parser.add_argument("--backend", default="auto", choices=("auto", "cuda", "interpreter"))
    parser.add_argument("--max-steps", type=int, default=40, help="tool calls per episode")
    parser.add_argument("--concurrency", type=int, default=4, help="episodes at once")
    ok = asyncio.run(evaluate(parser.parse_args()))
    if ok and not any(ok):
        print(f"every episode failed ({len(ok)})", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
