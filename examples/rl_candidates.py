"""A small RL loop on the Gymnasium API that learns from the env's reward.

The policy is a softmax over candidate kernels per task (a contextual bandit; the context is the
task named on the first line of the reset observation). Each episode it picks a candidate, writes
it to solution.py (or keeps the stub), and submits; REINFORCE with a running-mean baseline updates
the chosen task's preferences from the reward. The candidates come with the repository: the expert
references and tests/solutions/correct (correct), tests/solutions/wrong (each with a real bug) and
the stub. Nothing tells the policy which are correct: it learns that from the reward alone. On a GPU
the reward is the speedup, so among correct candidates it learns to prefer the faster.

Three tasks run side by side in a gymnasium AsyncVectorEnv. On the CPU interpreter backend the
default 14 iterations (42 episodes) take a few minutes on two cores.

Needs matplotlib for its plot, and wandb with ``--wandb-project``: the ``agents`` extra,
``pip install -e ".[agents]"``, checked before anything runs.

    python examples/rl_candidates.py                       # writes examples/results/rl_candidates.{png,json}
    WANDB_MODE=offline python examples/rl_candidates.py --wandb-project d2k-rl
"""

from __future__ import annotations

import argparse
import json
import time
from functools import partial
from pathlib import Path

import gymnasium as gym
import numpy as np

import d2k_env
from d2k_env.extras import require
from d2k_env.task import project_root

ROOT = project_root()
SUBMIT = json.dumps({"tool": "submit", "args": {}})
KEEP_STUB = None  # the candidate "submit solution.py as it is"

# task -> candidate files (None: keep the stub); which are correct is used only to plot progress
CANDIDATES = {
    "fused_add_rmsnorm": ["references/fused_add_rmsnorm.py", "tests/solutions/correct/fused_add_rmsnorm_chunked.py",
                          "tests/solutions/wrong/fused_add_rmsnorm_no_weight.py",
                          "tests/solutions/wrong/fused_add_rmsnorm_first_rows_only.py", KEEP_STUB],
    "merge_attn_states": ["references/merge_attn_states.py", "tests/solutions/wrong/merge_attn_states_ignores_inf.py",
                          KEEP_STUB],
    "per_token_group_quant_fp8": ["references/per_token_group_quant_fp8.py",
                                  "tests/solutions/wrong/per_token_group_quant_fp8_fnuz_range.py", KEEP_STUB],
}


def known_correct(candidate: str | None) -> bool:
    return candidate is not None and candidate.startswith(("references/", "tests/solutions/correct/"))


def first_action(candidate: str | None) -> str:
    """Write the candidate, or (for the stub) just look at solution.py: every episode is two steps."""
    if candidate is KEEP_STUB:
        return json.dumps({"tool": "read_file", "args": {"path": "solution.py"}})
    return json.dumps({"tool": "write_file", "args": {"path": "solution.py", "content": (ROOT / candidate).read_text()}})


def task_of(observation: str) -> str:
    return observation.split("\n", 1)[0].removeprefix("# Task: ").split(" ")[0]


class SoftmaxBandit:
    """Per-task softmax preferences trained with REINFORCE and a running-mean reward baseline."""

    def __init__(self, arms: dict[str, int], lr: float, rng: np.random.Generator):
        self.theta = {task: np.zeros(n) for task, n in arms.items()}
        self.baseline = {task: 0.0 for task in arms}
        self.lr, self.rng = lr, rng

    def probs(self, task: str) -> np.ndarray:
        z = np.exp(self.theta[task] - self.theta[task].max())
        return z / z.sum()

    def sample(self, task: str) -> int:
        return int(self.rng.choice(len(self.theta[task]), p=self.probs(task)))

    def update(self, task: str, arm: int, reward: float) -> None:
        grad = -self.probs(task)
        grad[arm] += 1.0
        self.theta[task] += self.lr * (reward - self.baseline[task]) * grad
        self.baseline[task] += 0.3 * (reward - self.baseline[task])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--iterations", type=int, default=14, help="one episode per task each")
    parser.add_argument("--lr", type=float, default=2.0)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--backend", default="interpreter", choices=("auto", "cuda", "interpreter"))
    parser.add_argument("--out", default=str(Path(__file__).parent / "results"))
    parser.add_argument("--wandb-project", help="also log to wandb (WANDB_MODE=offline works)")
    args = parser.parse_args()
    require("agents", ["matplotlib"] + (["wandb"] if args.wandb_project else []))

    tasks = list(CANDIDATES)
    envs = gym.vector.AsyncVectorEnv(
        [partial(gym.make, d2k_env.env_id(t), backend=args.backend, max_episode_steps=4) for t in tasks])
    bandit = SoftmaxBandit({t: len(c) for t, c in CANDIDATES.items()}, args.lr, np.random.default_rng(args.seed))
    tracker = None
    if args.wandb_project:
        from d2k_env.tracking import WandbTracker

        tracker = WandbTracker(args.wandb_project, {"example": "rl_candidates", "candidates": CANDIDATES,
                                                    "lr": args.lr, "seed": args.seed, "backend": args.backend},
                               Path(args.out))  # wandb writes under OUT/wandb

    def p_correct(task: str) -> float:
        return float(sum(p for p, c in zip(bandit.probs(task), CANDIDATES[task]) if known_correct(c)))

    history = [{"iteration": 0, "rewards": None, "p_correct": {t: p_correct(t) for t in tasks}}]
    observations, _ = envs.reset(seed=args.seed)
    start = time.monotonic()
    for iteration in range(1, args.iterations + 1):
        order = [task_of(o) for o in observations]
        arms = [bandit.sample(t) for t in order]
        envs.step(tuple(first_action(CANDIDATES[t][a]) for t, a in zip(order, arms)))
        _, rewards, terminated, _, _ = envs.step(tuple(SUBMIT for _ in order))
        assert terminated.all(), "every episode ends at submit"
        for task, arm, reward in zip(order, arms, rewards):
            bandit.update(task, arm, float(reward))
            if tracker:
                tracker.log_episode({"reward": float(reward), "iteration": iteration, f"p_correct/{task}": p_correct(task),
                                     "correct_choice": known_correct(CANDIDATES[task][arm])})
        history.append({"iteration": iteration, "rewards": {t: float(r) for t, r in zip(order, rewards)},
                        "choices": {t: CANDIDATES[t][a] or "stub" for t, a in zip(order, arms)},
                        "p_correct": {t: p_correct(t) for t in tasks}})
        print(f"iteration {iteration:>2} ({time.monotonic() - start:5.0f} s): mean reward {np.mean(rewards):.2f}; "
              "P(correct candidate) " + ", ".join(f"{t} {p_correct(t):.2f}" for t in tasks), flush=True)
        observations, *_ = envs.step(tuple(SUBMIT for _ in order))  # autoreset: this step starts new episodes
    envs.close()

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "rl_candidates.json").write_text(json.dumps({"args": {k: v for k, v in vars(args).items() if k != "out"},
                                                     "history": history}, indent=1) + "\n")
    plot(history, tasks, out / "rl_candidates.png")
    if tracker:
        tracker.finish({f"final_p_correct/{t}": p_correct(t) for t in tasks})
    print(f"wrote {out / 'rl_candidates.png'} and {out / 'rl_candidates.json'}")


def plot(history: list[dict], tasks: list[str], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 3.8))
    its = [h["iteration"] for h in history[1:]]
    mean = [np.mean(list(h["rewards"].values())) for h in history[1:]]
    running = np.cumsum(mean) / np.arange(1, len(mean) + 1)
    left.plot(its, mean, "o", alpha=0.5, label="mean reward of the 3 episodes")
    left.plot(its, running, "-", label="running mean")
    uniform = np.mean([np.mean([known_correct(c) for c in CANDIDATES[t]]) for t in tasks])
    left.axhline(uniform, color="gray", ls="--", lw=0.8, label=f"uniform random choice ({uniform:.2f})")
    left.set_xlabel("iteration (one episode per task)")
    left.set_ylabel("reward from the env")
    left.set_ylim(-0.05, 1.05)
    left.legend(fontsize=8)
    for task in tasks:
        right.plot([h["iteration"] for h in history], [h["p_correct"][task] for h in history], marker=".", label=task)
    right.set_xlabel("iteration")
    right.set_ylabel("P(policy picks a correct candidate)")
    right.set_ylim(0, 1.05)
    right.legend(fontsize=8)
    fig.suptitle("REINFORCE over candidate kernels on D2K envs (CPU interpreter backend)", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


if __name__ == "__main__":
    main()
