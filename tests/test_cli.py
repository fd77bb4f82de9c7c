"""The d2k command, end to end on the CPU backend."""

import json
import os
import subprocess
import sys
from importlib.metadata import version

import pytest

from d2k_env.cli import main
from wrong_edits import wrong_solution
from d2k_env.task import load_task, project_root, task_ids

ROOT = project_root()
REFERENCE = str(ROOT / "references/fused_add_rmsnorm.py")


def test_list_shows_every_task_and_workload(capsys):
    assert main(["list"]) == 0
    out = capsys.readouterr().out
    for needle in ("fused_add_rmsnorm", "merge_attn_states", "per_token_group_quant_fp8", "16384x4096",
                   "normalisation", "quantization"):
        assert needle in out


def test_list_wraps_on_a_narrow_terminal_and_never_imports_torch():
    """In a fresh interpreter: the specs are read, not run, so torch stays unimported; at 60
    columns every workload name comes out whole, nothing is cut with an ellipsis."""
    probe = "import sys; from d2k_env.cli import main; code = main(['list']); print(code, 'torch' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, timeout=120,
                          env={**os.environ, "COLUMNS": "60"})
    out = done.stdout
    assert out.splitlines()[-1] == "0 False", done.stderr
    assert "…" not in out and all(len(line) <= 60 for line in out.splitlines())
    for needle in ("16384x32x128", "64x8192 * (M=64,", "normalisation"):
        assert needle in out, out
    for task_id in task_ids():  # every workload name whole, however the columns fall as tasks are added
        task = load_task(task_id)
        assert all(w.name in out for w in task.workloads + task.smoke_workloads), (task_id, out)


def test_version_is_the_installed_distributions(capsys):
    with pytest.raises(SystemExit) as exit:
        main(["--version"])
    assert exit.value.code == 0
    assert capsys.readouterr().out.startswith(f"d2k-env {version('d2k-env')} (")


def test_show_prints_the_prompt_with_chosen_guidance(capsys):
    assert main(["show", "merge_attn_states", "--guidance", "L1+L2", "--backend", "interpreter"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("# Task: merge_attn_states") and "layers shown: L1, L2" in out
    assert "L3 - low-level" not in out


def test_eval_reference_and_wrong_solution(capsys, tmp_path):
    report = tmp_path / "r.json"
    assert main(["eval", "fused_add_rmsnorm", str(ROOT / "references/fused_add_rmsnorm.py"), "--backend", "interpreter",
                 "--json", str(report)]) == 0
    captured = capsys.readouterr()
    assert "PASSED" in captured.out and "5x200" in captured.out
    # Progress goes to stderr (not a terminal here: a line as it starts and one as it ends).
    assert "fused_add_rmsnorm on interpreter: test of 3 workload(s) ..." in captured.err
    assert "fused_add_rmsnorm on interpreter: test of 3 workload(s): done in" in captured.err
    assert json.loads(report.read_text())["correct"] is True
    assert main(["eval", "fused_add_rmsnorm", 
                 str(wrong_solution("fused_add_rmsnorm_no_weight", tmp_path)),
                 "--backend", "interpreter"]) == 1
    assert "FAILED: incorrect on workload(s)" in capsys.readouterr().out


def test_eval_corrects_a_backend_guessed_without_torch(capsys, monkeypatch):
    import d2k_env.evaluator as evaluator
    # As on a machine whose driver sees a GPU that torch cannot use: the workers started for the
    # guess are replaced once torch, imported for the task, answers.
    monkeypatch.setattr(evaluator, "quick_backend", lambda backend: "cuda")
    monkeypatch.setattr(evaluator, "resolve_backend", lambda backend: "interpreter")  # on a GPU machine too
    assert main(["eval", "fused_add_rmsnorm", str(ROOT / "references/fused_add_rmsnorm.py")]) == 0
    assert "(test, interpreter backend)" in capsys.readouterr().out


def test_demo_runs_a_rewarded_episode_and_says_when_it_evaluates(capsys):
    assert main(["demo", "per_token_group_quant_fp8", "--backend", "interpreter"]) == 0
    out = capsys.readouterr().out
    assert "step 5" in out and "Submitted. Reward: 1.0000" in out and "episode over after 5 steps" in out
    # Each evaluation announces itself before its seconds of silence, and says when it is done.
    step4, step5 = out.index("step 4"), out.index("step 5")
    assert step4 < out.index("running the tests on the interpreter backend ...") < out.index("run_tests:") < step5
    assert step5 < out.index("evaluating the submission on the interpreter backend ...") < out.index("Submitted.")
    assert out.count("done in") == 2  # the other steps are instant: no progress for them


def _one_error_line(capsys) -> str:
    """The error the command printed: one line on stderr, nothing on stdout."""
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err.count("\n") == 1 and "Traceback" not in captured.err, captured
    return captured.err


@pytest.fixture
def no_workers(monkeypatch):
    """A d2k eval that starts a worker fails the test: its mistakes are found before."""
    import d2k_env.cli

    def started(*args):
        raise AssertionError("a worker pool was started")
    monkeypatch.setattr(d2k_env.cli, "_one_shot_pool", started)


@pytest.fixture
def no_gpu(monkeypatch):
    import d2k_env.evaluator
    monkeypatch.setattr(d2k_env.evaluator, "no_gpu_reason", lambda: "the installed torch is a CPU-only build")


def test_unknown_task_is_a_clear_error(capsys):
    assert main(["show", "nope"]) == 2
    assert _one_error_line(capsys) == f"error: unknown task 'nope'; the tasks: {', '.join(sorted(task_ids()))}\n"


@pytest.mark.parametrize("command", ["show", "eval", "demo", "run"])
def test_a_mistyped_task_names_the_close_ones(capsys, no_workers, tmp_path, command):
    argv = {"show": ["show", "fused_add_rmsnrom"], "eval": ["eval", "fused_add_rmsnrom", REFERENCE],
            "demo": ["demo", "fused_add_rmsnrom"], "run": ["run", str(tmp_path / "run"), "--policy", "reference",
                                                           "--tasks", "merge_attn_states", "fused_add_rmsnrom"]}
    assert main(argv[command]) == 2
    assert "unknown task 'fused_add_rmsnrom'; did you mean fused_add_rmsnorm?" in _one_error_line(capsys)
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize("command", ["eval", "demo", "run"])
def test_backend_cuda_without_a_gpu_is_a_clear_error(capsys, no_workers, no_gpu, tmp_path, command):
    argv = {"eval": ["eval", "fused_add_rmsnorm", REFERENCE], "demo": ["demo"],
            "run": ["run", str(tmp_path / "run"), "--policy", "reference"]}[command]
    assert main(argv + ["--backend", "cuda"]) == 2
    assert _one_error_line(capsys) == ("error: --backend cuda needs a GPU: the installed torch is a CPU-only build; "
                                       "--backend interpreter checks correctness on the CPU\n")
    assert not (tmp_path / "run").exists()


def test_backend_cuda_that_torch_cannot_use_is_a_clear_error(capsys, monkeypatch):
    """The driver counts a GPU (as where its version is too old for torch's), torch says no: one
    line, once torch is imported, and the workers started for the GPU are ended."""
    import torch

    import d2k_env.cli
    import d2k_env.evaluator

    class Pool:
        closed = False

        def close(self):
            Pool.closed = True
    monkeypatch.setattr(d2k_env.evaluator, "no_gpu_reason", lambda: None)
    monkeypatch.setattr(d2k_env.cli, "_one_shot_pool", lambda backend, submit: Pool())
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert main(["eval", "fused_add_rmsnorm", REFERENCE, "--backend", "cuda"]) == 2
    assert "torch cannot use it (torch.cuda.is_available() is False)" in _one_error_line(capsys)
    assert Pool.closed


def test_an_unknown_workload_lists_the_valid_ones(capsys, no_workers):
    assert main(["eval", "fused_add_rmsnorm", REFERENCE, "--backend", "interpreter", "--workloads", "9x9"]) == 2
    assert _one_error_line(capsys) == ("error: task 'fused_add_rmsnorm' has no workload '9x9' on the interpreter "
                                       "backend; its workloads: 8x256, 5x200, 3x1000\n")
    assert main(["eval", "fused_add_rmsnorm", REFERENCE, "--backend", "interpreter", "--workloads", "8x256",
                 "64x8192"]) == 2
    assert "no workload '64x8192' on the interpreter backend (a GPU workload: it needs --backend cuda)" \
        in _one_error_line(capsys)


def test_a_workload_of_the_other_backend_waits_for_torch_to_confirm_a_guessed_one(capsys, monkeypatch):
    """auto guessed cuda from the driver, torch says the interpreter: the smoke workload named is
    the right one, and the name no backend knows was refused before anything started."""
    import d2k_env.evaluator as evaluator
    monkeypatch.setattr(evaluator, "quick_backend", lambda backend: "cuda")
    monkeypatch.setattr(evaluator, "resolve_backend", lambda backend: "interpreter")  # on a GPU machine too
    assert main(["eval", "fused_add_rmsnorm", REFERENCE, "--workloads", "5x200"]) == 0
    assert "(test, interpreter backend)" in capsys.readouterr().out
    monkeypatch.setattr("d2k_env.cli._one_shot_pool", None)  # would fail if called
    assert main(["eval", "fused_add_rmsnorm", REFERENCE, "--workloads", "9x9"]) == 2
    assert "no workload '9x9' on the cuda backend; its workloads: 16384x4096," in _one_error_line(capsys)


def test_a_directory_or_a_file_that_is_not_utf8_is_a_clear_error(capsys, no_workers, tmp_path):
    assert main(["eval", "fused_add_rmsnorm", str(tmp_path)]) == 2
    assert _one_error_line(capsys) == (f"error: {tmp_path} is a directory: give the solution file (a .py file "
                                       f"defining forward)\n")
    latin1 = tmp_path / "solution.py"
    latin1.write_bytes("# café\ndef forward(x):\n    return x\n".encode("latin-1"))
    assert main(["eval", "fused_add_rmsnorm", str(latin1)]) == 2
    assert _one_error_line(capsys) == f"error: {latin1} is not UTF-8 text (byte 0xe9 at offset 5): save it as UTF-8\n"


def test_a_json_report_that_cannot_be_written_is_found_before_evaluating(capsys, no_workers, tmp_path):
    assert main(["eval", "fused_add_rmsnorm", REFERENCE, "--json", str(tmp_path / "absent" / "r.json")]) == 2
    assert f"no such directory {tmp_path / 'absent'}" in _one_error_line(capsys)


def test_argument_mistakes_are_one_line(capsys, tmp_path):
    with pytest.raises(SystemExit) as exit:
        main(["run", str(tmp_path / "run"), "--jobs", "0"])
    assert exit.value.code == 2
    assert _one_error_line(capsys) == ("d2k run: error: argument --jobs: must be at least 1, not 0 "
                                       "(see d2k run --help)\n")
    with pytest.raises(SystemExit):
        main(["eval", "fused_add_rmsnorm", REFERENCE, "--backend", "gpu"])
    assert "argument --backend: invalid choice: 'gpu'" in _one_error_line(capsys)


def test_new_task_refuses_a_shipped_id_and_one_discovery_would_skip(capsys, tmp_path):
    assert main(["new-task", "merge_attn_states", "--dir", str(tmp_path)]) == 2
    assert _one_error_line(capsys) == ("error: task id 'merge_attn_states' is taken: d2k-env ships a task of that id; "
                                       "choose another id\n")
    assert main(["new-task", "_helper", "--dir", str(tmp_path)]) == 2
    assert "starts with '_': task discovery skips such files" in _one_error_line(capsys)
    assert main(["new-task", "my_op", "--dir", REFERENCE]) == 2
    assert _one_error_line(capsys) == f"error: --dir {REFERENCE} is not a directory\n"
    assert not any(tmp_path.iterdir())


def test_a_missing_solution_file_is_a_clear_error(capsys, tmp_path):
    """The path comes back whole, on one line (a long one is not broken where the console ends, a
    bracket is not taken for markup), to be copied."""
    missing = tmp_path / ("a-long-directory-name-" * 4) / "[v2] absent.py"
    assert main(["eval", "fused_add_rmsnorm", str(missing), "--backend", "interpreter"]) == 2
    assert _one_error_line(capsys) == f"error: no such file: {missing}\n"


def test_an_unreadable_run_directory_is_a_clear_error(capsys, tmp_path):
    target = tmp_path / "not-a-dir"
    target.write_text("a file where a run directory should be")
    assert main(["report", str(target)]) == 2
    assert _one_error_line(capsys).startswith("error: ")


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
