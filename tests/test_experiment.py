"""End to end: `d2k run` against a scripted OpenAI-compatible server on the CPU backend, killed
midway and rerun, then `d2k report`, and the same run logged to wandb offline."""

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

import wandb_records
from d2k_env.cli import main
from d2k_env.task import builtin_root, load_task, task_ids
from d2k_env.tasks.wrong_solutions import generate
from d2k_env.trajectory import chat_transcript, read_trajectory
from mock_openai import MockChatServer

CONDITIONS = ("none", "L1+L2+L3")
# The shipped tasks (the run below strips D2K_TASKS_PATH), whatever they are.
TASKS = task_ids(builtin_root())
WRONG_TASK = TASKS[0]


def _written(task_id: str, condition: str) -> tuple[str, bool]:
    """What the scripted model writes, and whether it is correct: without guidance, the first task's
    reference with its last row left unwritten; the reference everywhere else."""
    task = load_task(task_id)
    if (task_id, condition) == (WRONG_TASK, "none"):
        (wrong,) = [g for g in generate(task) if g.kind == "last_row_unwritten"]
        return wrong.source, False
    return task.reference_path.read_text(), True


SOLUTIONS = {(t, c): _written(t, c) for t in TASKS for c in CONDITIONS}
EPISODES = len(SOLUTIONS)
EXPECTED_TOOLS = ["list_files", "read_file", "read_file", None, "write_file", "submit"]


def episode_of(prompt: str) -> tuple[str, str]:
    task = prompt.split("\n", 1)[0].removeprefix("# Task: ").split(" ")[0]
    return task, "none" if "layers shown: none" in prompt else "L1+L2+L3"


def kernel_engineer(body):
    """Two calls in one reply, a Hermes text call, an unparseable reply, a write, a submit."""
    task, condition = episode_of(body["messages"][1]["content"])
    turn = sum(m["role"] == "assistant" for m in body["messages"])
    return [
        {"tool_calls": [("list_files", {}), ("read_file", {"path": "baseline.py"})]},
        {"content": 'Now the stub.\n<tool_call>{"name": "read_file", "arguments": {"path": "solution.py"}}</tool_call>'},
        {"content": "I am ready to write the kernel."},
        {"tool_calls": [("write_file", {"path": "solution.py",
                                        "content": SOLUTIONS[(task, condition)][0]})]},
        {"tool_calls": [("submit", {})]},
    ][turn]


def lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


@pytest.fixture
def server():
    with MockChatServer(kernel_engineer, faults=[429, 500]) as s:
        yield s


def test_run_killed_midway_resumes_reports_and_logs_to_wandb(server, tmp_path):
    run_dir = tmp_path / "run"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "D2K_", "WANDB_"))}
    env.update(OPENAI_BASE_URL=server.url, OPENAI_API_KEY="test-key", WANDB_MODE="offline", WANDB_SILENT="true",
               WANDB_CONFIG_DIR=str(tmp_path / "wandb-config"), WANDB_CACHE_DIR=str(tmp_path / "wandb-cache"),
               WANDB_DATA_DIR=str(tmp_path / "wandb-data"))
    cmd = [sys.executable, "-m", "d2k_env.cli", "run", str(run_dir), "--backend", "interpreter", "--jobs", "2",
           "--max-steps", "12", "--wandb-project", "d2k-tests"]
    episodes = run_dir / "episodes"

    # 1. Killed (SIGKILL: no chance to clean up) as soon as the first episode is finished.
    first_log = tmp_path / "first-run.log"
    with open(first_log, "w") as log:
        first = subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    deadline = time.monotonic() + 240
    while not list(episodes.glob("*.jsonl")) and first.poll() is None and time.monotonic() < deadline:
        time.sleep(0.2)
    try:
        os.killpg(first.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass  # it ended by itself: the assertion below says how
    first.wait()
    server.wait_idle()
    finished_before = {p.name: p.read_bytes() for p in episodes.glob("*.jsonl")}
    assert 1 <= len(finished_before) < EPISODES, "the kill must land midway:\n" + first_log.read_text()[-3000:]
    billed_before = len(server.billed)
    prompts_before = {lines(episodes / name)[0]["prompt"] for name in finished_before}

    # 2. The same command again: finished episodes are kept and skipped, the rest run once.
    server.faults = [429, 500]
    rerun = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=480)
    assert rerun.returncode == 0, rerun.stdout[-3000:] + rerun.stderr[-3000:]
    assert f"resuming: {len(finished_before)} of {EPISODES} episodes already finished" in " ".join(rerun.stdout.split())
    files = sorted(episodes.iterdir())
    assert not [p for p in files if not p.name.endswith(".jsonl")], "no .tmp file may remain"
    assert len(files) == EPISODES
    for name, data in finished_before.items():
        assert (episodes / name).read_bytes() == data, f"{name} was rewritten"
    assert not [b for b in server.billed[billed_before:] if b["first_user"] in prompts_before], \
        "an episode finished before the kill was run again"

    trajectories = {}
    for path in files:
        header, *steps, summary = lines(path)
        key = (header["task"], header["condition"])
        trajectories[key] = (header, steps, summary)
        assert path.name == f"mock-kernel-model__{key[0]}__{key[1]}__seed0.jsonl"
        assert header["policy_settings"]["model"] == "mock-kernel-model"
        assert header["policy_settings"]["tool_mode"] == "function" and header["backend"] == "interpreter"
        assert [s["tool"] for s in steps] == EXPECTED_TOOLS
        assert steps[0]["model_output"]["tool_calls"][1]["name"] == "read_file" and steps[1]["model_output"] is None
        assert "not valid JSON" in steps[3]["observation"] and '{"tool": "<name>"' in steps[3]["observation"]
        assert steps[5]["evaluation"]["mode"] == "submit" and steps[5]["terminated"]
        code, correct = SOLUTIONS[key]
        assert summary["status"] == "finished" and summary["correct"] is correct
        assert steps[5]["evaluation"]["correct"] is correct and summary["total_reward"] == (1.0 if correct else 0.0)
        assert summary["submitted_code"] == code
        assert summary["tokens"]["total_tokens"] == sum(s["tokens"]["total_tokens"] for s in steps)
        run_billing = server.billed[:billed_before] if header["prompt"] in prompts_before else server.billed[billed_before:]
        assert summary["tokens"]["total_tokens"] == sum(b["prompt_tokens"] + b["completion_tokens"]
                                                        for b in run_billing if b["first_user"] == header["prompt"])
    assert set(trajectories) == set(SOLUTIONS)
    for path in files:  # the transcript rebuilt from a file is what the model was sent, then its last turn
        messages = chat_transcript(read_trajectory(path))
        sent = [r["messages"] for r in server.requests if r["messages"][1]["content"] == messages[1]["content"]][-1]
        assert messages[:len(sent)] == sent and len(messages) == len(sent) + 2
    rerun_retries = sum(s["tokens"]["retries"] for h, _, s in trajectories.values() if h["prompt"] not in prompts_before)
    assert rerun_retries == 2 and Counter(server.statuses)[429] == 2 and Counter(server.statuses)[500] == 2
    for path in run_dir.rglob("*"):
        if path.is_file():
            assert b"test-key" not in path.read_bytes(), f"the API key leaked into {path}"

    # 3. The report's numbers are the trajectories' numbers.
    assert main(["report", str(run_dir)]) == 0
    report = json.loads((run_dir / "report.json").read_text())
    [policy] = report["policies"]
    assert policy["policy"] == "mock-kernel-model" and policy["timed"] is False
    for cell in policy["cells"]:
        _, _, summary = trajectories[(cell["task"], cell["condition"])]
        assert (cell["episodes"], cell["correct"]) == (1, int(summary["correct"]))
        assert cell["speedup"] is None and cell["reference_fraction"] is None  # the interpreter cannot time
    rates = {c: sum(trajectories[(t, c)][2]["correct"] for t in TASKS) / len(TASKS) for c in CONDITIONS}
    assert rates == {"none": pytest.approx(1 - 1 / len(TASKS)), "L1+L2+L3": 1.0}
    assert {s["condition"]: s["correctness_rate"] for s in policy["conditions"]} == pytest.approx(rates)
    assert policy["uplift"]["overall"]["correctness_delta"] == pytest.approx(rates["L1+L2+L3"] - rates["none"])
    md = (run_dir / "report.md").read_text()
    assert f"| {WRONG_TASK} | none | 0/1 |" in md and f"| {TASKS[-1]} | none | 1/1 |" in md
    none, delta = round(100 * rates["none"]), round(100 * (1 - rates["none"]))
    pairs = f"{len(TASKS)} ({len(TASKS)} task{'s' if len(TASKS) > 1 else ''})"  # seed 0 of every task
    assert f"| overall | none | L1+L2+L3 | {pairs} | {none}% -> 100%: +{delta} pp (one seed) | n/a |" in md
    assert "Speeds not measured" in md
    assert (run_dir / "guidance_pairs.png").stat().st_size > 10_000 and (run_dir / "layer_stacking.png").exists()

    # 4. wandb (offline): one run, resumed by id, with episode and step metrics, the kernels and the config.
    run_id = json.loads((run_dir / "run.json").read_text())["wandb"]["d2k-tests"]
    offline = sorted((run_dir / "wandb").glob("offline-run-*"))
    assert offline and all(d.name.endswith(run_id) for d in offline)
    log = next(offline[-1].glob("run-*.wandb"))
    history = wandb_records.history(log)
    ran_again = EPISODES - len(finished_before)
    ended = [h for h in history if "episode/correct" in h]
    assert len(ended) == ran_again
    assert sorted(h["episode/index"] for h in ended) == list(range(len(finished_before), EPISODES))
    assert len([h for h in history if "step/reward" in h]) == ran_again * len(EXPECTED_TOOLS)
    assert sum(h["episode/correct"] for h in ended) == sum(
        s["correct"] for h, _, s in trajectories.values() if h["prompt"] not in prompts_before)
    for condition, rate in rates.items():  # running rates count the episodes finished before the kill too
        logged = [h[f"condition/{condition}/correct_rate"] for h in history if f"condition/{condition}/correct_rate" in h]
        assert logged[-1] == pytest.approx(rate)
    table = json.loads(next(offline[-1].glob("files/media/table/kernels_*.table.json")).read_text())
    rows = [dict(zip(table["columns"], row)) for row in table["data"]]
    assert len(rows) == EPISODES
    for row in rows:
        _, _, summary = trajectories[(row["task"], row["condition"])]
        assert row["code"] == summary["submitted_code"] and row["correct"] == summary["correct"]
    config = wandb_records.config(log)
    assert config["backend"] == "interpreter" and config["gpu"] is None and config["guidance_conditions"] == ["L1+L2+L3", "none"]
    assert config["versions"]["torch"] and config["versions"]["triton"] and config["policy"]["model"] == "mock-kernel-model"
    summary = wandb_records.summary(log)
    assert summary["mock-kernel-model/none/correctness_rate"] == pytest.approx(rates["none"])
