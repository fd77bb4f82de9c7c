"""Run a chat model on one task without guidance and with all three layers, then compare.

The model is served by any OpenAI-compatible server (vLLM, SGLang, a hosted API):

    vllm serve Qwen/Qwen3-32B --enable-auto-tool-choice --tool-call-parser hermes   # for example
    export OPENAI_BASE_URL=http://localhost:8000/v1 OPENAI_API_KEY=unused   # D2K_MODEL: optional
    python examples/llm_agent.py fused_add_rmsnorm --run-dir runs/rmsnorm --seeds 0 1 2
    WANDB_MODE=offline python examples/llm_agent.py fused_add_rmsnorm --wandb-project d2k

Each episode is one trajectory file under RUN_DIR/episodes; running the command again resumes.
The same experiment from the command line is
``d2k run RUN_DIR --tasks fused_add_rmsnorm --seeds 0 1 2 && d2k report RUN_DIR``.
"""

from __future__ import annotations

import argparse

from d2k_env.agents import ChatPolicy
from d2k_env.agents.openai_chat import make_client, resolve_model
from d2k_env.report import to_markdown, write_report
from d2k_env.reward import REWARD_VERSION
from d2k_env.runner import RunSettings, plan, run_experiment
from d2k_env.wording import plural


def main() -> None:
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


if __name__ == "__main__":
    main()
