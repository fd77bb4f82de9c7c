"""The d2k command, end to end on the CPU backend."""

import json

from d2k_env.cli import main
from d2k_env.task import project_root

ROOT = project_root()


def test_list_shows_every_task_and_workload(capsys):
    assert main(["list"]) == 0
    out = capsys.readouterr().out
    for needle in ("fused_add_rmsnorm", "merge_attn_states", "per_token_group_quant_fp8", "16384x4096",
                   "normalisation", "quantization"):
        assert needle in out


def test_show_prints_the_prompt_with_chosen_guidance(capsys):
    assert main(["show", "merge_attn_states", "--guidance", "L1+L2", "--backend", "interpreter"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("# Task: merge_attn_states") and "layers shown: L1, L2" in out
    assert "L3 - low-level" not in out


def test_eval_reference_and_wrong_solution(capsys, tmp_path):
    report = tmp_path / "r.json"
    assert main(["eval", "fused_add_rmsnorm", str(ROOT / "references/fused_add_rmsnorm.py"), "--backend", "interpreter",
                 "--json", str(report)]) == 0
    out = capsys.readouterr().out
    assert "PASSED" in out and "5x200" in out
    assert json.loads(report.read_text())["correct"] is True
    assert main(["eval", "fused_add_rmsnorm", 
                 str(ROOT / "tests/solutions/wrong/fused_add_rmsnorm_no_weight.py"),
                 "--backend", "interpreter"]) == 1
    assert "FAILED: incorrect on workload(s)" in capsys.readouterr().out


def test_eval_corrects_a_backend_guessed_without_torch(capsys, monkeypatch):
    import d2k_env.evaluator as evaluator
    # As on a machine whose driver sees a GPU that torch cannot use: the workers started for the
    # guess are replaced once torch, imported for the task, answers.
    monkeypatch.setattr(evaluator, "quick_backend", lambda backend: "cuda")
    assert main(["eval", "fused_add_rmsnorm", str(ROOT / "references/fused_add_rmsnorm.py")]) == 0
    assert "(test, interpreter backend)" in capsys.readouterr().out


def test_demo_runs_a_rewarded_episode(capsys):
    assert main(["demo", "per_token_group_quant_fp8", "--backend", "interpreter"]) == 0
    out = capsys.readouterr().out
    assert "step 5" in out and "Submitted. Reward: 1.0000" in out and "episode over after 5 steps" in out


def test_unknown_task_is_a_clear_error(capsys):
    assert main(["show", "nope"]) == 2
    assert "unknown task 'nope'" in capsys.readouterr().out


def test_a_missing_solution_file_is_a_clear_error(capsys, tmp_path):
    """The path comes back whole, on one line (a long one is not broken where the console ends, a
    bracket is not taken for markup), to be copied."""
    missing = tmp_path / ("a-long-directory-name-" * 4) / "[v2] absent.py"
    assert main(["eval", "fused_add_rmsnorm", str(missing), "--backend", "interpreter"]) == 2
    out = capsys.readouterr().out
    assert "no such file" in out and f"{missing}\n" in out and "Traceback" not in out


def test_an_unreadable_run_directory_is_a_clear_error(capsys, tmp_path):
    target = tmp_path / "not-a-dir"
    target.write_text("a file where a run directory should be")
    assert main(["report", str(target)]) == 2
    assert "error:" in capsys.readouterr().out


def test_run_reports_a_failed_episode_readably_and_counts_in_the_singular(capsys, tmp_path, monkeypatch):
    import d2k_env.agents

    def unreachable(task):
        raise ConnectionError("the server said [bold]no[/bold]")  # markup-like text must come out verbatim

    monkeypatch.setattr(d2k_env.agents, "reference_policy", unreachable)
    monkeypatch.delenv("FORCE_COLOR", raising=False)  # would make rich treat pytest's capture as a terminal
    monkeypatch.delenv("TTY_COMPATIBLE", raising=False)
    assert main(["run", str(tmp_path), "--policy", "reference", "--tasks", "merge_attn_states", "--guidance", "none",
                 "--backend", "interpreter"]) == 1
    out = " ".join(capsys.readouterr().out.split())  # the console wraps long lines
    assert "1 episode (1 task x 1 guidance condition x 1 seed)" in out, out
    assert "merge_attn_states [none] seed 0 (reference): failed: ConnectionError: the server said [bold]no[/bold]" \
        in out, out
    assert "[red]" not in out and "[/red]" not in out
    assert "0 episodes finished, 1 failed" in out
