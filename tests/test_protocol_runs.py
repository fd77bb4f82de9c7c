"""Issue 30's protocol end to end on the CPU: `d2k run` records each step's property findings and
the submission's in the trajectory, a judge (the scripted server on loopback) grades solutions and
designs into it, and `d2k report` builds the per-layer table from the trajectories alone, with the
scores the script gives known in advance."""

import json
import sys

import pytest

from conftest import call
from d2k_env.agents import ScriptedPolicy, reference_policy
from d2k_env.cli import main
from d2k_env.judge import Budget, Judge
from d2k_env.report import build_report, to_markdown, write_report
from d2k_env.runner import RunDirectory, RunSettings, plan, run_experiment
from d2k_env.task import load_task
from d2k_env.trajectory import load_run
from mock_openai import MockChatServer

TASK = "fused_add_rmsnorm"
SOLUTION_RUN = RunSettings(backend="interpreter", max_steps=6, observation_chars=200)
DESIGN_RUN = RunSettings(backend="interpreter", max_steps=4, observation_chars=200, mode="design")
# What the scripted judge says of a solution, per property the checks left open.
SOLUTION_SCORES = {"stats_from_fp32_sum": "realised", "traffic_at_floor": "partly", "second_pass_from_l2": "not",
                   "constexpr_masked_chunks": "realised"}


@pytest.fixture(autouse=True)
def api_key(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    monkeypatch.delenv("D2K_MODEL", raising=False)


def asked(body) -> list[str]:
    section = body["messages"][1]["content"].split("# Properties to judge\n")[1].split("\n\n")[0]
    return [line[2:].split(" [")[0] for line in section.splitlines()]


def scripted_judge(body) -> dict:
    """Solutions: SOLUTION_SCORES. Designs: all realised, but all not for the design written without guidance."""
    prompt = body["messages"][1]["content"]
    if "# The design" in prompt:
        scores = {pid: "not" if "design under none" in prompt else "realised" for pid in asked(body)}
    else:
        scores = {pid: SOLUTION_SCORES[pid] for pid in asked(body)}
    return {"content": json.dumps({"properties": [{"id": i, "score": s, "reason": f"{i}: as scripted"}
                                                  for i, s in scores.items()]})}


def solution_policy(key):
    """Writes the reference and submits under L1; only looks around under none (never submits)."""
    if key.condition == "none":
        return ScriptedPolicy([call("list_files")] * SOLUTION_RUN.max_steps, name=key.policy, then_submit=False)
    policy = reference_policy(load_task(key.task))
    policy.name = key.policy
    return policy


def design_policy(key):
    return ScriptedPolicy([call("read_file", path="baseline.py"),
                           call("submit_design", design=f"One fused pass, rows per program: a design under "
                                                        f"{key.condition}.")], name=key.policy, then_submit=False)


def test_a_solution_run_records_findings_and_verdicts_and_the_report_reads_them(tmp_path):
    keys = plan("m", [TASK], ["none", "L1"], [0])
    with MockChatServer(scripted_judge) as server:
        judge = Judge(base_url=server.url, model="judge-m")
        result = run_experiment(tmp_path, keys, solution_policy, SOLUTION_RUN, progress="quiet", judge=judge)
        judge.close()
    assert len(result.finished) == 2 and not result.failed
    assert len(server.requests) == 1  # the submitted solution only: nothing to judge under none
    assert asked(server.requests[0]) == ["stats_from_fp32_sum", "traffic_at_floor", "second_pass_from_l2",
                                         "constexpr_masked_chunks"]  # the settled ones were given as facts
    none, guided = load_run(tmp_path)[1], load_run(tmp_path)[0]
    assert guided.header["condition"] == "L1" and guided.header["judge"]["model"] == "judge-m"
    assert guided.header["mode"] == "solution"
    # Each step: the findings of its evaluation (None where the tool evaluated nothing).
    assert [s["tool"] for s in guided.steps] == ["list_files", "read_file", "write_file", "run_tests", "submit"]
    assert [s["properties"] is None for s in guided.steps] == [True, True, True, False, False]
    assert guided.steps[4]["properties"]["one_fused_launch"]["status"] == "realised"
    status = {r["id"]: (r["layer"], r["status"]) for r in guided.summary["properties"]}
    assert status == {"one_fused_launch": ("L1", "realised"), "stats_from_fp32_sum": ("L1", None),
                      "traffic_at_floor": ("L1", "unchecked"), "row_per_program": ("L2", "realised"),
                      "second_pass_from_l2": ("L2", None), "constexpr_masked_chunks": ("L3", None)}
    verdict = guided.summary["judge"]
    assert verdict["kind"] == "solution" and verdict["model"] == "judge-m"
    assert {p["id"]: (p["score"], p["source"]) for p in verdict["properties"]} == {
        "one_fused_launch": ("realised", "automatic"), "row_per_program": ("realised", "automatic"),
        **{pid: (score, "judge") for pid, score in SOLUTION_SCORES.items()}}
    assert none.summary["judge"] == {"error": "nothing was submitted: no solution to judge"}
    assert {r["status"] for r in none.summary["properties"]} == {"unchecked", None}
    assert all(r["detail"] == "nothing was submitted" for r in none.summary["properties"] if r["status"])

    [p] = build_report(tmp_path).policies
    cells = {(c.condition, c.layer): c for c in p.layers}
    l1, l2, l3 = (cells[("L1", layer)] for layer in ("L1", "L2", "L3"))
    assert (l1.auto_realised, l1.auto_not, l1.auto_unchecked, l1.auto_share) == (1, 0, 1, 1.0)
    assert (l1.judged_realised, l1.judged_partly, l1.judged_not, l1.unjudged, l1.judged_share) == (1, 1, 0, 0, 0.5)
    assert (l2.auto_share, l2.judged_share, l2.judged_not) == (1.0, 0.0, 1)
    assert (l3.auto_share, l3.judged_share) == (None, 1.0)  # no check on L3: n/a, never a zero
    n1 = cells[("none", "L1")]
    assert (n1.auto_unchecked, n1.auto_share, n1.unjudged, n1.judged_share) == (2, None, 3, None)
    assert p.judged and p.judge_errors == [{"task": TASK, "condition": "none", "seed": 0,
                                            "error": "nothing was submitted: no solution to judge"}]
    md = to_markdown(build_report(tmp_path))
    assert "| L1 | 1 | 100% (1/1; 1 unchecked; one seed) | 100% (1/1; one seed) | n/a (0/0) |" in md
    assert "| L1 | 1 | 50% (1/2; 1 partly; one seed) | 0% (0/1; one seed) | 100% (1/1; one seed) |" in md
    assert "| none | 1 | n/a (0/0; 3 unjudged) | n/a (0/0; 2 unjudged) | n/a (0/0; 1 unjudged) |" in md
    assert "The judge gave no verdict on 1 episode" in md


def test_a_design_run_is_judged_and_reported_apart_with_its_uplift(tmp_path):
    keys = plan("m", [TASK], ["none", "L1+L2+L3"], [0, 1])
    with MockChatServer(scripted_judge) as server:
        judge = Judge(base_url=server.url, model="judge-m")
        result = run_experiment(tmp_path, keys, design_policy, DESIGN_RUN, progress="quiet", judge=judge)
        judge.close()
    assert len(result.finished) == 4 and len(server.requests) == 4
    assert all(len(asked(body)) == 6 for body in server.requests)  # nothing ran: every property asked
    t = load_run(tmp_path)[0]
    assert t.header["mode"] == "design" and t.summary["submitted"] and t.summary["correct"] is None
    assert t.summary["submitted_design"].endswith("a design under L1+L2+L3.") and t.summary["total_reward"] == 0.0
    assert t.summary["judge"]["kind"] == "design" and {r["status"] for r in t.summary["properties"]} == {None}
    report = build_report(tmp_path)
    [p] = report.policies
    assert p.mode == "design" and p.label == "m (designs)"
    cells = {(c.condition, c.layer): c for c in p.layers}
    assert cells[("none", "L1")].judged_share == 0.0 and cells[("L1+L2+L3", "L1")].judged_share == 1.0
    assert (cells[("L1+L2+L3", "L1")].judged_realised, cells[("L1+L2+L3", "L1")].episodes) == (6, 2)  # 3 x 2 seeds
    md = to_markdown(report)
    assert "## Policy `m`, design-only episodes" in md and "### Per task and condition" not in md
    assert "| L1+L2+L3 | 2 (1 task) |" + " +100 pp [+100 to +100 pp] |" * 3 in md  # the same on either seed
    assert [(u.condition, u.pairs) for u in p.layer_uplift] == [("L1+L2+L3", [(TASK, 0), (TASK, 1)])]


def test_the_uplift_over_none_is_paired(tmp_path, monkeypatch):
    """L1 ran seeds 0 and 1, none seed 0 alone: the uplift compares seed 0 with seed 0 (+100 pp), while
    L1's own row averages both seeds (its seed-1 design is judged not realised)."""
    def judge_script(body):
        prompt = body["messages"][1]["content"]
        score = "not" if "design under none" in prompt or "seed 1" in prompt else "realised"
        return {"content": json.dumps({"properties": [{"id": i, "score": score, "reason": "r"} for i in asked(body)]})}

    def policy(key):
        return ScriptedPolicy([call("submit_design", design=f"A design under {key.condition}, seed {key.seed}.")],
                              name=key.policy, then_submit=False)

    keys = plan("m", [TASK], ["none"], [0]) + plan("m", [TASK], ["L1"], [0, 1])
    with MockChatServer(judge_script) as server:
        judge = Judge(base_url=server.url, model="judge-m")
        run_experiment(tmp_path, keys, policy, DESIGN_RUN, progress="quiet", judge=judge)
        judge.close()
    [p] = build_report(tmp_path).policies
    cells = {(c.condition, c.layer): c for c in p.layers}
    assert cells[("L1", "L1")].judged_share == 0.5 and cells[("L1", "L1")].episodes == 2
    # Over seeds: resampling seed 0 twice gives 100%, seed 1 twice 0%; none ran one seed: no interval.
    assert cells[("L1", "L1")].judged_interval == (0.0, 1.0) and cells[("L1", "L1")].auto_interval is None
    assert cells[("none", "L1")].judged_interval is None and cells[("none", "L1")].seeds == 1
    assert "| L1 | 2 | 50% [0-100%] (3/6) | 50% [0-100%] (2/4) | 50% [0-100%] (1/2) |" in to_markdown(
        build_report(tmp_path))
    from matplotlib.figure import Figure

    saved = {}
    monkeypatch.setattr(Figure, "savefig", lambda fig, fname, *a, **k: saved.setdefault(fname.name, fig))
    write_report(tmp_path)
    judged = saved["property_layers.png"].axes[1]  # automatic checks, then the judge
    segments = [segment.tolist() for c in judged.collections for segment in c.get_segments()]
    assert len(segments) == 3 and {(lo, hi) for [[_, lo], [_, hi]] in segments} == {(0.0, 1.0)}  # L1's, per layer
    [u] = p.layer_uplift
    assert u.pairs == [(TASK, 0)] and u.delta("L1", "judged_share") == 1.0 and u.delta("L1", "auto_share") is None
    assert "| L1 | 1 (1 task) |" + " +100 pp (one seed) |" * 3 in to_markdown(build_report(tmp_path))


def test_a_judge_that_fails_is_recorded_and_the_episode_still_finishes(tmp_path):
    keys = plan("m", [TASK], ["none", "L1"], [0])
    with MockChatServer(scripted_judge) as server:
        judge = Judge(base_url=server.url, model="judge-m", budget=Budget(requests=1))
        result = run_experiment(tmp_path, keys, design_policy, DESIGN_RUN, progress="quiet", judge=judge)
        judge.close()
    assert len(result.finished) == 2 and len(server.requests) == 1
    summaries = [t.summary for t in load_run(tmp_path)]
    assert [("error" in s["judge"]) for s in summaries].count(True) == 1
    error = next(s["judge"]["error"] for s in summaries if "error" in s["judge"])
    assert error == "JudgeBudgetError: judge budget spent: 1 of 1 requests used"
    [p] = build_report(tmp_path).policies
    assert sum(c.unjudged for c in p.layers) == 6 and len(p.judge_errors) == 1


def test_one_run_directory_holds_one_mode(tmp_path):
    with RunDirectory(tmp_path, SOLUTION_RUN):
        pass
    with pytest.raises(ValueError, match="'mode': 'solution'.*'mode': 'design'"):
        with RunDirectory(tmp_path, DESIGN_RUN):
            pass
    meta = json.loads((tmp_path / "run.json").read_text())
    del meta["settings"]["mode"]  # a directory made before modes: its episodes are solution ones
    (tmp_path / "run.json").write_text(json.dumps(meta))
    with RunDirectory(tmp_path, SOLUTION_RUN):
        pass
    with pytest.raises(ValueError, match="mode must be one of"):
        RunSettings(mode="plan")


def test_cli_runs_designs_with_a_judge_and_reports_them(tmp_path, capsys):
    with MockChatServer(scripted_judge) as server:
        code = main(["run", str(tmp_path), "--tasks", TASK, "--guidance", "none", "L1", "--backend", "interpreter",
                     "--policy", "reference", "--mode", "design", "--judge-model", "judge-m", "--judge-base-url",
                     server.url, "--judge-cache", str(tmp_path / "verdicts"), "-q"])
    out = capsys.readouterr().out
    assert code == 0 and "design-only episodes; judge judge-m" in " ".join(out.split())
    # The reference design is the same text under both conditions: the second is the cache's.
    assert len(server.requests) == 1 and len(list((tmp_path / "verdicts").glob("*.json"))) == 1
    [t, other] = load_run(tmp_path)
    assert sorted([t.summary["judge"]["cached"], other.summary["judge"]["cached"]]) == [False, True]
    assert t.header["policy"] == "reference-design" and load_task(TASK).guidance("L3") in t.summary["submitted_design"]
    assert main(["report", str(tmp_path)]) == 0
    md = (tmp_path / "report.md").read_text()
    assert "## Policy `reference-design`, design-only episodes" in md
    # "design under none" is in neither design
    assert "| L1 | 1 | 100% (3/3; one seed) | 100% (2/2; one seed) | 100% (1/1; one seed) |" in md
    assert (tmp_path / "property_layers.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_cli_report_without_matplotlib_writes_the_tables_and_says_so(tmp_path, capsys, monkeypatch):
    keys = plan("m", [TASK], ["none"], [0])
    run_experiment(tmp_path, keys, design_policy, DESIGN_RUN, progress="quiet")
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib: ImportError
    assert main(["report", str(tmp_path)]) == 0
    captured = capsys.readouterr()
    assert "Judge: no episode was judged" in captured.out and (tmp_path / "report.md").exists()
    assert not (tmp_path / "property_layers.png").exists()
    assert "plots not drawn" in captured.err and 'pip install "d2k-env[agents]"' in captured.err


def test_progress_lines_say_a_design_was_submitted_and_how_it_was_judged(tmp_path):
    import io

    from d2k_env.progress import progress_reporter

    out = io.StringIO()
    with MockChatServer(scripted_judge) as server:
        judge = Judge(base_url=server.url, model="judge-m")
        run_experiment(tmp_path, plan("m", [TASK], ["L1"], [0]), design_policy, DESIGN_RUN,
                       progress=progress_reporter("lines", out), judge=judge)
        judge.close()
    assert "design submitted, judged 6/6 realised, reward 0.000, 2 steps" in out.getvalue()
    assert "correct" not in out.getvalue()


def test_cli_show_prints_the_design_prompt_and_refuses_wandb_for_designs(tmp_path, capsys):
    assert main(["show", TASK, "--mode", "design", "--backend", "interpreter"]) == 0
    assert "submit_design(design: string)" in capsys.readouterr().out
    assert main(["run", str(tmp_path), "--tasks", TASK, "--policy", "reference", "--mode", "design",
                 "--wandb-project", "p", "--backend", "interpreter"]) == 2
    assert "a design run has none of them" in capsys.readouterr().err
    assert not (tmp_path / "episodes").exists()


def test_a_run_again_with_a_judge_judges_the_episodes_finished_without_a_verdict(tmp_path):
    keys = plan("m", [TASK], ["none", "L1"], [0])
    run_experiment(tmp_path, keys, design_policy, DESIGN_RUN, progress="quiet")  # no judge
    assert [t.summary["judge"] for t in load_run(tmp_path)] == [None, None]
    with MockChatServer(scripted_judge) as server:
        judge = Judge(base_url=server.url, model="judge-m", budget=Budget(requests=1))
        again = run_experiment(tmp_path, keys, lambda k: pytest.fail("a finished episode ran again"), DESIGN_RUN,
                               progress="quiet", judge=judge)
        assert again.skipped == 2 and len(again.judged) == 2  # one verdict, one budget error: both rewritten
        errors = [t.summary["judge"].get("error") for t in load_run(tmp_path)]
        assert errors.count("JudgeBudgetError: judge budget spent: 1 of 1 requests used") == 1
        judge = Judge(base_url=server.url, model="judge-m")
        last = run_experiment(tmp_path, keys, lambda k: pytest.fail("ran again"), DESIGN_RUN, progress="quiet",
                              judge=judge)
        assert len(last.judged) == 1 and len(server.requests) == 2  # only the one the budget stopped
        assert run_experiment(tmp_path, keys, lambda k: pytest.fail("ran again"), DESIGN_RUN, progress="quiet",
                              judge=judge).judged == []  # every one judged: nothing asked, nothing rewritten
    assert len(server.requests) == 2
    trajectories = load_run(tmp_path)
    assert all(t.header["judge"]["model"] == "judge-m" and t.summary["judge"]["kind"] == "design"
               for t in trajectories)
    assert [len(t.steps) for t in trajectories] == [2, 2]  # the steps are as they were
    [p] = build_report(tmp_path).policies
    assert p.judged and not p.judge_errors and cells_share(p, "L1", "L1") == 1.0 and cells_share(p, "none", "L1") == 0.0


def cells_share(p, condition, layer):
    return next(c.judged_share for c in p.layers if (c.condition, c.layer) == (condition, layer))
