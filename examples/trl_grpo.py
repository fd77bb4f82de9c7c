"""GRPO with TRL on the kernel tasks: the model calls the env's tools, the env's reward trains it.

Every (task, guidance condition, seed) is one prompt; each prompt gets ``--num-generations``
rollouts, each in its own env, and GRPO compares their rewards (the submit's, 0 without one).
Needs the ``trl`` extra (checked before anything runs) and a chat model whose template TRL can parse tool calls from (Qwen3 and
Qwen2.5, Llama 3.1/3.2, GPT-OSS, GLM-4 MoE, ...):

    pip install -e ".[trl]"
    python examples/trl_grpo.py --model Qwen/Qwen3-0.6B --tasks fused_add_rmsnorm --guidance none L1+L2+L3
    python examples/trl_grpo.py --model Qwen/Qwen3-8B --backend cuda --max-steps 200 --output-dir runs/grpo

On the CPU interpreter backend an evaluation takes seconds, so this runs end to end on a laptop
with a small model; rewards are speedups only on a GPU (``--backend cuda``).
"""

from __future__ import annotations

import argparse
import os
from functools import partial

from d2k_env.extras import require
from d2k_env.integrations.common import GUIDANCE_CONDITIONS
from d2k_env.integrations.trl import KernelToolEnv, build_dataset


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", required=True, help="a chat model id or local path")
    parser.add_argument("--tasks", nargs="+", default=None, help="default: every registered task")
    parser.add_argument("--guidance", nargs="+", default=list(GUIDANCE_CONDITIONS))
    parser.add_argument("--seeds", nargs="+", type=int, default=[0])
    parser.add_argument("--backend", default="auto", choices=("auto", "cuda", "interpreter"))
    parser.add_argument("--reward", default="speedup")
    parser.add_argument("--max-env-steps", type=int, default=40, help="tool calls per episode")
    parser.add_argument("--num-generations", type=int, default=4)
    parser.add_argument("--max-steps", type=int, default=20, help="optimizer steps")
    parser.add_argument("--max-completion-length", type=int, default=8192)
    parser.add_argument("--learning-rate", type=float, default=1e-6)
    parser.add_argument("--output-dir", default="runs/trl-grpo")
    parser.add_argument("--report-to", default="none", help="e.g. wandb")
    parser.add_argument("--cpu", action="store_true",
                        help="train on the CPU (float32) even with a GPU; without one, the CPU is the default")
    args = parser.parse_args()
    require("trl", ["trl", "transformers", "datasets"] + (["wandb"] if args.report_to == "wandb" else []))

    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")  # environment_factory is experimental in TRL
    import torch
    from trl import GRPOConfig, GRPOTrainer

    # TRL's defaults assume a GPU (bf16): without one they stop with "Your setup doesn't support bf16/gpu".
    if not args.cpu and not torch.cuda.is_available():
        print("No CUDA GPU: training on the CPU in float32 (as --cpu would).")
        args.cpu = True

    config = GRPOConfig(output_dir=args.output_dir, num_generations=args.num_generations,
                        per_device_train_batch_size=args.num_generations, max_steps=args.max_steps,
                        max_completion_length=args.max_completion_length,
                        max_tool_calling_iterations=args.max_env_steps, learning_rate=args.learning_rate,
                        report_to=args.report_to, logging_steps=1,
                        use_cpu=args.cpu, bf16=False if args.cpu else None)
    trainer = GRPOTrainer(
        model=args.model, args=config,
        train_dataset=build_dataset(args.tasks, args.guidance, args.seeds),
        # One env per rollout; an env's evaluations go to its own local service (see KernelEnv).
        environment_factory=partial(KernelToolEnv, backend=args.backend, reward=args.reward,
                                    max_steps=args.max_env_steps),
    )
    trainer.train()
    trainer.save_model(args.output_dir)


if __name__ == "__main__":
    main()
