"""Run a chat model on one task without guidance and with all three layers, then compare.

Needs the ``agents`` extra (openai, wandb, matplotlib), checked before anything runs:
``pip install -e ".[agents]"``. The model is served by any OpenAI-compatible server (vLLM, SGLang,
a hosted API):

    vllm serve Qwen/Qwen3-32B --enable-auto-tool-choice --tool-call-parser hermes   # for example
    export OPENAI_BASE_URL=http://localhost:8000/v1 OPENAI_API_KEY=unused   # D2K_MODEL: optional
    python examples/llm_agent.py fused_add_rmsnorm --run-dir runs/rmsnorm --seeds 0 1 2
    WANDB_MODE=offline python examples/llm_agent.py fused_add_rmsnorm --wandb-project d2k

Each episode is one trajectory file under RUN_DIR/episodes; running the command again resumes.
The exit status is ``d2k run``'s: 0 when every episode finished, 1 when some failed (the server gave
up, the policy raised), 2 when the extra is missing.
The same experiment from the command line is
``d2k run RUN_DIR --tasks fused_add_rmsnorm --seeds 0 1 2 && d2k report RUN_DIR``.
"""

from __future__ import annotations

import argparse
import sys

from d2k_env.extras import require

require("agents")
from d2k_env.agents import ChatPolicy  # noqa: E402 (after the check)
from d2k_env.agents.openai_chat import make_client, resolve_model  # noqa: E402
from d2k_env.report import to_markdown, write_report  # noqa: E402
from d2k_env.reward import REWARD_VERSION  # noqa: E402
from d2k_env.runner import RunSettings, plan, run_experiment  # noqa: E402
from d2k_env.wording import plural  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("task")
    parser.add_argument("--run-dir", default="runs/llm-agent")
    parser.add_argument("--seeds", nargs="+", type=int, default=[0])
    parser.add_argument("--backend", default="auto", choices=("auto", "cuda", "interpreter"))
    parser.add_argument("--max-steps", type=int, default=350)
    parser.add_argument("--tool-mode", default="function", choices=("function", "text"))
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--wandb-project")
    args = parser.parse_args()

    client = make_client()  # OPENAI_BASE_URL, OPENAI_API_KEY
    model = resolve_model(client)  # D2K_MODEL, else the server's only model
    client.close()
    keys = plan(model, [args.task], ["none", "L1+L2+L3"], args.seeds)
    settings = RunSettings(backend=args.backend, max_steps=args.max_steps)

    def make_policy(key):
        return ChatPolicy(model=model, tool_mode=args.tool_mode)

    callbacks = []
    if args.wandb_project:
        from d2k_env.tracking import WandbTracker, experiment_config

        config = experiment_config(keys, settings, make_policy(keys[0]).describe())
        callbacks.append(WandbTracker(args.wandb_project, config, args.run_dir))

    result = run_experiment(args.run_dir, keys, make_policy, settings, jobs=args.jobs, callbacks=callbacks)
    print(f"{plural(len(result.finished), 'episode')} finished, {len(result.failed)} failed, "
          f"{result.skipped} already done")
    report, paths = write_report(args.run_dir)
    print(to_markdown(report))
    print("wrote", ", ".join(map(str, paths)))
    # The section this run scored; a resumed directory may also hold episodes of an older reward version.
    ours = next(p for p in report.policies if p.policy == model and p.reward_version == REWARD_VERSION)
    for tracker in callbacks:
        tracker.finish({f"{s.condition}/correctness_rate": s.correctness_rate for s in ours.conditions})
    return 1 if result.failed else 0  # each failure was reported as it happened


if __name__ == "__main__":
    sys.exit(main())
