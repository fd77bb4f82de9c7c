"""The experiment runner: trajectory files, resume, interruption, failures (CPU backend, no evaluations)."""

import io
import json
import re
import threading
import time

import pytest

from conftest import call
from d2k_env.agents import Policy, ScriptedPolicy
from d2k_env.runner import (RunDirectory, RunDirectoryError, RunSettings, condition_name, plan, run_experiment,
                            submission_metrics)
from d2k_env.trajectory import (TrajectoryError, TrajectoryWriter, chat_transcript, episodes_dir, load_run,
                                read_trajectory)

SETTINGS = RunSettings(backend="interpreter", max_steps=3, observation_chars=300)


def browsing(key):
    """Looks around without evaluating anything; the 3-step budget truncates the episode."""
    return ScriptedPolicy([call("list_files"), call("read_file", path="baseline.py"), "not an action"], name="browse")


def test_plan_is_the_product_with_canonical_conditions():
    keys = plan("p", ["merge_attn_states", "fused_add_rmsnorm"], ["none", "l2+L1", "L1+L2"], [0, 1])
    assert len(keys) == 2 * 2 * 2 and {k.condition for k in keys} == {"none", "L1+L2"}
    assert condition_name(()) == "none" and condition_name("L3+L1") == "L1+L3"
    with pytest.raises(KeyError, match="unknown task"):
        plan("p", ["nope"], ["none"], [0])
    with pytest.raises(ValueError, match="guidance"):
        plan("p", ["merge_attn_states"], ["L4"], [0])


def test_trajectory_files_record_every_step(tmp_path):
    keys = plan("browse", ["merge_attn_states"], ["none", "L1+L2+L3"], [0])
    result = run_experiment(tmp_path, keys, browsing, SETTINGS, jobs=2)
    assert sorted(result.finished) == sorted(keys) and not result.failed and not result.interrupted
    files = sorted(episodes_dir(tmp_path).iterdir())
    assert [f.name for f in files] == ["browse__merge_attn_states__L1+L2+L3__seed0.jsonl",
                                       "browse__merge_attn_states__none__seed0.jsonl"]
    lines = [json.loads(l) for l in files[1].read_text().splitlines()]
    header, steps, summary = lines[0], lines[1:-1], lines[-1]
    assert header["type"] == "header" and header["task"] == "merge_attn_states" and header["condition"] == "none"
    assert header["guidance"] == [] and header["backend"] == "interpreter" and header["max_steps"] == 3
    assert header["prompt"].startswith("# Task: merge_attn_states") and "layers shown: none" in header["prompt"]
    assert {"torch", "triton", "python", "d2k_env"} <= set(header["versions"])
    assert header["policy_settings"] == {"name": "browse", "kind": "ScriptedPolicy"}
    assert [s["index"] for s in steps] == [1, 2, 3] and [s["tool"] for s in steps] == ["list_files", "read_file", None]
    assert steps[1]["observation_chars"] > 300 and "omitted" in steps[1]["observation"]  # clipped in storage
    assert len(steps[1]["observation"]) < 400
    assert "not valid JSON" in steps[2]["observation"] and steps[2]["error"]
    assert [s["truncated"] for s in steps] == [False, False, True]
    assert all(s["wall_s"] >= s["env_s"] >= 0 for s in steps)
    assert summary == {**summary, "type": "summary", "status": "finished", "error": None, "steps": 3,
                       "truncated": True, "submitted": False, "correct": False, "speedup": None,
                       "total_reward": 0.0, "submitted_code": None}
    guided = read_trajectory(files[0])
    assert "layers shown: L1, L2, L3" in guided.header["prompt"]


def test_rerun_skips_finished_episodes_and_replay_reproduces_them(tmp_path):
    keys = plan("browse", ["fused_add_rmsnorm"], ["none"], [0, 1])
    run_experiment(tmp_path, keys, browsing, SETTINGS)
    before = {p.name: p.read_bytes() for p in episodes_dir(tmp_path).iterdir()}
    again = run_experiment(tmp_path, keys, lambda k: pytest.fail("a finished episode ran again"), SETTINGS)
    assert again.skipped == 2 and not again.finished
    assert {p.name: p.read_bytes() for p in episodes_dir(tmp_path).iterdir()} == before
    replay = ScriptedPolicy.from_trajectory(load_run(tmp_path)[0].path)
    assert replay.actions == [call("list_files"), call("read_file", path="baseline.py"), "not an action"]
    messages = chat_transcript(load_run(tmp_path)[0])  # a scripted episode as a text-mode chat
    assert [m["role"] for m in messages] == ["system", "user"] + ["assistant", "user"] * 3
    assert messages[1]["content"].startswith("# Task: fused_add_rmsnorm") and messages[6]["content"] == "not an action"
    assert "not valid JSON" in messages[7]["content"]


class StoppingPolicy(Policy):
    """Sets the run's stop event at its second action, like a Ctrl-C in the middle of an episode."""

    def __init__(self, stop):
        super().__init__()
        self.stop, self.calls = stop, 0

    def __call__(self, observation):
        self.calls += 1
        if self.calls == 2:
            self.stop.set()
        return call("list_files")


def test_interrupted_run_leaves_nothing_then_resumes_every_episode_once(tmp_path):
    keys = plan("browse", ["fused_add_rmsnorm"], ["none", "L1"], [0])
    stop = threading.Event()
    result = run_experiment(tmp_path, keys, lambda k: StoppingPolicy(stop), SETTINGS, stop=stop)
    assert result.interrupted and not result.finished
    assert list(episodes_dir(tmp_path).iterdir()) == []  # no partial trajectory, no .tmp
    result = run_experiment(tmp_path, keys, browsing, SETTINGS)
    assert sorted(result.finished) == sorted(keys)
    assert sorted(t.key for t in load_run(tmp_path)) == sorted(keys)


def test_stale_tmp_files_are_removed_on_start(tmp_path):
    keys = plan("browse", ["fused_add_rmsnorm"], ["none"], [0])
    episodes_dir(tmp_path).mkdir(parents=True)
    stale = TrajectoryWriter(episodes_dir(tmp_path) / keys[0].filename)
    stale.write({"type": "header"})  # a run killed mid-episode leaves this
    assert stale.tmp_path.exists()
    run_experiment(tmp_path, keys, browsing, SETTINGS)
    assert [p.name for p in episodes_dir(tmp_path).iterdir()] == [keys[0].filename]


class Exploding(Policy):
    name = "browse"

    def __call__(self, observation):
        raise ConnectionError("model server unreachable")


def test_failed_episodes_are_recorded_and_retried(tmp_path):
    keys = plan("browse", ["fused_add_rmsnorm"], ["none"], [0])
    result = run_experiment(tmp_path, keys, lambda k: Exploding(), SETTINGS)
    assert result.failed and "model server unreachable" in result.failed[0][1]
    [t] = load_run(tmp_path)
    assert t.summary["status"] == "failed" and t.summary["error"] == "ConnectionError: model server unreachable"
    assert "Traceback" in t.summary["traceback"] and t.header["prompt"].startswith("# Task")
    result = run_experiment(tmp_path, keys, browsing, SETTINGS)  # a failed episode is not "finished"
    assert result.finished == keys and load_run(tmp_path)[0].summary["status"] == "finished"


def test_run_directory_guards(tmp_path):
    keys = plan("browse", ["fused_add_rmsnorm"], ["none"], [0])
    run_experiment(tmp_path, keys, browsing, SETTINGS)
    with pytest.raises(ValueError, match="max_steps") as refused:
        run_experiment(tmp_path, keys, browsing, RunSettings(backend="interpreter", max_steps=5))
    # the refusal released the lock, even while its traceback (and the directory object) is alive
    assert refused.traceback and run_experiment(tmp_path, keys, browsing, SETTINGS).skipped == 1
    with RunDirectory(tmp_path, SETTINGS):
        with pytest.raises(RunDirectoryError, match="in use"):
            run_experiment(tmp_path, keys, browsing, SETTINGS)
    path = episodes_dir(tmp_path) / keys[0].filename
    path.write_text(path.read_text().splitlines()[0] + "\n")  # damaged by hand: no summary
    with pytest.raises(TrajectoryError, match="delete that file"):
        run_experiment(tmp_path, keys, browsing, SETTINGS)
    with pytest.raises(ValueError, match="jobs"):
        run_experiment(tmp_path, keys, browsing, SETTINGS, jobs=0)


def test_submission_metrics_of_timed_and_untimed_results():
    untimed = {"correct": True, "timed": False, "workloads": [{"speedup": None, "roofline_fraction": None}]}
    assert submission_metrics(untimed) == {"submitted": True, "correct": True, "timed": False, "speedup": None,
                                           "roofline_fraction": None}
    timed = {"correct": True, "timed": True, "workloads": [{"speedup": 2.0, "roofline_fraction": 0.5},
                                                           {"speedup": 8.0, "roofline_fraction": 0.8}]}
    m = submission_metrics(timed)
    assert m["speedup"] == pytest.approx(4.0) and m["roofline_fraction"] == pytest.approx(0.4 ** 0.5 * 1.0)
    assert submission_metrics({**timed, "correct": False})["speedup"] is None
    assert submission_metrics(None)["submitted"] is False


class BrokenTracker:
    """A callback that fails once an episode ends, like a tracker losing its backend."""

    def on_run_start(self, planned, skipped): pass
    def on_episode_start(self, key): pass
    def on_step(self, key, record): pass
    def on_episode_stopped(self, key): pass
    def on_interrupt(self): pass

    def on_episode_end(self, key, header, summary):
        raise OSError("tracker backend gone")


class Slow(Policy):
    """0.2 s per action, so no other episode can finish while the run reacts to an error."""

    name = "browse"

    def __call__(self, observation):
        time.sleep(0.2)
        return call("list_files")


def test_a_failing_callback_stops_the_run_without_leaving_episodes_running(tmp_path):
    keys = plan("browse", ["fused_add_rmsnorm", "merge_attn_states"], ["none", "L1"], [0])
    with pytest.raises(OSError, match="tracker backend gone"):
        run_experiment(tmp_path, keys, lambda k: Slow(), SETTINGS, jobs=2, callbacks=[BrokenTracker()])
    assert not list(episodes_dir(tmp_path).glob("*.tmp"))  # every thread ended before the error surfaced
    finished = {t.key for t in load_run(tmp_path)}
    assert 1 <= len(finished) < len(keys)
    result = run_experiment(tmp_path, keys, browsing, SETTINGS, jobs=2)  # the lock was released
    assert result.skipped == len(finished) and len(result.finished) == len(keys) - len(finished)


def test_run_experiment_reports_progress_from_python_unless_quiet(tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("FORCE_COLOR", raising=False)  # would make rich treat pytest's capture as a terminal
    monkeypatch.delenv("TTY_COMPATIBLE", raising=False)
    keys = plan("browse", ["fused_add_rmsnorm"], ["none", "L1"], [0])
    run_experiment(tmp_path / "default", keys, browsing, SETTINGS)
    err = " ".join(capsys.readouterr().err.split())  # pytest's stderr is no terminal: plain lines
    for key in keys:
        assert f"{key}: not correct, reward 0.000, 3 steps, 0 tokens" in err, err
    assert "2/2" in err
    run_experiment(tmp_path / "quiet", keys, browsing, SETTINGS, progress="quiet")
    out, err = capsys.readouterr()
    assert "browse" not in out + err


class Terminal(io.StringIO):
    def isatty(self):
        return True


def test_progress_is_a_live_bar_in_a_terminal_and_plain_lines_elsewhere(tmp_path, monkeypatch):
    from d2k_env.progress import LineProgress, RichProgress, progress_reporter

    for name in ("NO_COLOR", "FORCE_COLOR", "TTY_COMPATIBLE", "COLORTERM"):  # rich reads these
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("TERM", "xterm-256color")

    assert isinstance(progress_reporter("auto", io.StringIO()), LineProgress)
    assert progress_reporter("quiet") is None
    with pytest.raises(ValueError, match="progress"):
        progress_reporter("loud")
    terminal = Terminal()
    reporter = progress_reporter("auto", terminal)
    assert isinstance(reporter, RichProgress)
    keys = plan("browse", ["fused_add_rmsnorm"], ["none", "L1"], [0])
    run_experiment(tmp_path, keys, lambda k: Exploding() if k.condition == "L1" else browsing(k), SETTINGS,
                   progress=reporter)
    raw = terminal.getvalue()
    assert "\x1b[" in raw  # styled: the verdicts are coloured, not written as markup
    text = " ".join(re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", raw).split())
    assert f"{keys[1]}: failed: ConnectionError: model server unreachable" in text, text
    assert f"{keys[0]}: not correct" in text and "[red]" not in text


def test_reward_version_is_in_every_info_and_every_trajectory(tmp_path):
    import gymnasium as gym

    from d2k_env.registration import env_id
    from d2k_env.reward import REWARD_VERSION

    env = gym.make(env_id("merge_attn_states"), backend="interpreter")
    _, info = env.reset(seed=0)
    assert info["reward_version"] == REWARD_VERSION
    *_, info = env.step(call("list_files"))
    assert info["reward_version"] == REWARD_VERSION
    env.close()
    keys = plan("browse", ["merge_attn_states"], ["none"], [0])
    run_experiment(tmp_path, keys, browsing, SETTINGS, progress="quiet")
    [t] = load_run(tmp_path)
    assert t.header["reward_version"] == REWARD_VERSION


def test_a_run_scored_under_another_reward_version_is_not_resumed(tmp_path):
    from d2k_env.reward import REWARD_VERSION

    keys = plan("browse", ["fused_add_rmsnorm"], ["none"], [0, 1])
    run_experiment(tmp_path, keys, browsing, SETTINGS, progress="quiet")
    path = episodes_dir(tmp_path) / keys[0].filename
    header, *rest = path.read_text().splitlines(keepends=True)
    path.write_text(json.dumps({**json.loads(header), "reward_version": REWARD_VERSION - 1}) + "\n" + "".join(rest))
    before = {p.name: p.read_bytes() for p in episodes_dir(tmp_path).iterdir()}
    with pytest.raises(ValueError, match=f"1 under reward version {REWARD_VERSION - 1} .*{keys[0].filename}"):
        run_experiment(tmp_path, keys, lambda k: pytest.fail("an episode ran beside older scores"), SETTINGS)
    assert {p.name: p.read_bytes() for p in episodes_dir(tmp_path).iterdir()} == before  # nothing touched
    path.rename(tmp_path / path.name)  # moved out, as the message says: it is played again
    again = run_experiment(tmp_path, keys, browsing, SETTINGS, progress="quiet")
    assert again.skipped == 1 and again.finished == [keys[0]]
