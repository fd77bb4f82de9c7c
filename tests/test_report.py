"""The report's arithmetic on timed trajectories, its tables, plots and errors.

The CPU backend cannot time, so the timed run here is written directly in the trajectory format,
its summaries computed by the runner's own :func:`submission_metrics` from evaluation results.
"""

import json
import math
import re
from pathlib import Path

import pytest

from d2k_env.cli import main
from d2k_env.report import build_report, to_markdown
from d2k_env.runner import submission_metrics
from d2k_env.task import project_root
from d2k_env.trajectory import FORMAT_VERSION, EpisodeKey, TrajectoryWriter, episodes_dir

# (task, condition, seed) -> workload speedups of a correct submission, or None for an incorrect one
OUTCOMES = {
    ("fused_add_rmsnorm", "none", 0): None, ("fused_add_rmsnorm", "none", 1): [2, 8],
    ("fused_add_rmsnorm", "L1", 0): [4, 4], ("fused_add_rmsnorm", "L1", 1): [1, 4],
    ("fused_add_rmsnorm", "L1+L2", 0): [9, 9], ("fused_add_rmsnorm", "L1+L2", 1): [9, 9],
    ("fused_add_rmsnorm", "L1+L2+L3", 0): [16, 16], ("fused_add_rmsnorm", "L1+L2+L3", 1): [4, 16],
    ("merge_attn_states", "none", 0): None, ("merge_attn_states", "none", 1): None,
    ("merge_attn_states", "L1", 0): [0.5, 0.5], ("merge_attn_states", "L1", 1): None,
    ("merge_attn_states", "L1+L2", 0): None, ("merge_attn_states", "L1+L2", 1): None,
    ("merge_attn_states", "L1+L2+L3", 0): [3, 3], ("merge_attn_states", "L1+L2+L3", 1): [3, 3],
}


def geo(xs):
    return math.exp(sum(math.log(x) for x in xs) / len(xs))


def write_episode(run_dir, key, speedups, status="finished", reward_version=1):
    evaluation = {"mode": "submit", "backend": "cuda", "timed": True, "error": None, "correct": speedups is not None,
                  "workloads": [{"name": f"w{i}", "correct": speedups is not None, "speedup": s, "roofline_fraction": s / 20}
                                for i, s in enumerate(speedups or [1.0, 1.0])]}
    w = TrajectoryWriter(episodes_dir(run_dir) / key.filename)
    w.write({"type": "header", "format": FORMAT_VERSION, "policy": key.policy, "task": key.task,
             "condition": key.condition, "seed": key.seed, "backend": "cuda", "reward": "speedup", "max_steps": 350,
             "gpu": "NVIDIA H200", "prompt": "...",
             **({} if reward_version is None else {"reward_version": reward_version})})
    w.write({"type": "step", "index": 1, "action": '{"tool": "submit"}', "evaluation": evaluation})
    w.write({"type": "summary", "status": status, "error": None if status == "finished" else "RateLimitError: gave up",
             "total_reward": 0.0, "steps": 1, **submission_metrics(evaluation), "submitted_code": "code",
             "tokens": {"total_tokens": 100 * (key.seed + 1)}})
    w.commit()


@pytest.fixture
def timed_run(tmp_path):
    episodes_dir(tmp_path).mkdir(parents=True)
    for (task, cond, seed), speedups in OUTCOMES.items():
        write_episode(tmp_path, EpisodeKey("model-a", task, cond, seed), speedups)
    write_episode(tmp_path, EpisodeKey("model-a", "merge_attn_states", "L1+L2+L3", 2), [3, 3], status="failed")
    write_episode(tmp_path, EpisodeKey("model-a", "per_token_group_quant_fp8", "none", 0), None, status="failed")
    return tmp_path


def reference(task):
    data = json.loads(sorted(project_root().glob("benchmarks/results/references-*.json"))[-1].read_text())
    return geo([r["speedup_vs_eager"] for r in data["rows"] if r["task"] == task])


def expected_cell(task, cond):
    """Episode speedup: geomean over workloads when correct, 1.0 when not; cell: geomean over seeds."""
    outcomes = [OUTCOMES[(task, cond, s)] for s in (0, 1)]
    return geo([geo(o) if o else 1.0 for o in outcomes]), sum(o is not None for o in outcomes)


def test_cells_follow_the_definitions(timed_run):
    [p] = build_report(timed_run).policies
    assert p.timed and p.policy == "model-a" and len(p.cells) == 9
    [only_failed] = [c for c in p.cells if not c.episodes]  # listed, counted nowhere
    assert (only_failed.task, only_failed.failed, only_failed.speedup) == ("per_token_group_quant_fp8", 1, None)
    for c in p.cells:
        if c is only_failed:
            continue
        speedup, correct = expected_cell(c.task, c.condition)
        assert (c.episodes, c.correct) == (2, correct), c
        assert c.speedup == pytest.approx(speedup)
        assert c.reference_fraction == pytest.approx(speedup / reference(c.task))
        correct_runs = [o for s in (0, 1) if (o := OUTCOMES[(c.task, c.condition, s)])]
        if correct_runs:
            assert c.roofline_fraction == pytest.approx(sum(geo([x / 20 for x in o]) for o in correct_runs)
                                                        / len(correct_runs))
            assert c.speedup_when_correct == pytest.approx(geo([geo(o) for o in correct_runs]))
        else:
            assert c.roofline_fraction is None and c.speedup_when_correct is None
    merge_l1 = next(c for c in p.cells if c.task == "merge_attn_states" and c.condition == "L1")
    assert merge_l1.speedup == pytest.approx(math.sqrt(0.5))  # a correct slow kernel keeps its 0.5x
    failed_cell = next(c for c in p.cells if c.task == "merge_attn_states" and c.condition == "L1+L2+L3")
    assert failed_cell.failed == 1 and failed_cell.episodes == 2  # failed episodes are apart
    assert p.failed[0] == {"task": "merge_attn_states", "condition": "L1+L2+L3", "seed": 2,
                           "error": "RateLimitError: gave up", "file": "model-a__merge_attn_states__L1+L2+L3__seed2.jsonl"}
    assert len(p.failed) == 2


def test_condition_summaries_and_uplift(timed_run):
    [p] = build_report(timed_run).policies
    tasks = ("fused_add_rmsnorm", "merge_attn_states")
    by = {s.condition: s for s in p.conditions}
    assert list(by) == ["none", "L1", "L1+L2", "L1+L2+L3"]
    assert by["none"].tasks == 2  # the task whose only episode failed is not a task of the condition
    for cond, s in by.items():
        cells = [expected_cell(t, cond) for t in tasks]
        assert s.correctness_rate == pytest.approx(sum(c / 2 for _, c in cells) / 2)
        assert s.performance_score == pytest.approx(geo([sp for sp, _ in cells]))
    assert by["none"].correctness_rate == 0.25 and by["L1+L2+L3"].correctness_rate == 1.0
    assert p.overall.correctness_delta == pytest.approx(0.75)
    assert p.overall.performance_ratio == pytest.approx(by["L1+L2+L3"].performance_score / by["none"].performance_score)
    assert [(u.source, u.target) for u in p.per_layer] == [("none", "L1"), ("L1", "L1+L2"), ("L1+L2", "L1+L2+L3")]
    assert p.per_layer[1].correctness_delta == pytest.approx(by["L1+L2"].correctness_rate - by["L1"].correctness_rate)


def test_report_files_tables_and_plots(timed_run, capsys):
    assert main(["report", str(timed_run)]) == 0
    out = capsys.readouterr().out
    md = (timed_run / "report.md").read_text()
    assert md in out
    speedup, _ = expected_cell("fused_add_rmsnorm", "L1+L2+L3")
    assert f"| fused_add_rmsnorm | L1+L2+L3 | 2/2 | {speedup:.2f}x |" in md
    assert "| merge_attn_states | L1+L2+L3 | 2/2 (1 failed) |" in md
    assert "nan" not in md.lower()
    # 2 tasks x seeds 0, 1; the interval over resampled seeds: seed 0 alone +100 pp, seed 1 alone +50 pp
    assert "| overall | none | L1+L2+L3 | 4 (2 tasks) | 25% -> 100%: +75 pp [+50 to +100 pp] |" in md
    assert "RateLimitError: gave up" in md and "1.0 when incorrect" in md
    data = json.loads((timed_run / "report.json").read_text())
    assert data["policies"][0]["conditions"][0]["condition"] == "none"
    assert data["policies"][0]["uplift"]["overall"]["correctness_delta"] == pytest.approx(0.75)
    for name in ("guidance_pairs.png", "layer_stacking.png"):
        png = (timed_run / name).read_bytes()
        assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 10_000


def test_report_on_bad_input_is_a_clear_error(tmp_path, capsys):
    def error():
        return " ".join(capsys.readouterr().err.split())  # errors go to stderr

    assert main(["report", str(tmp_path)]) == 2
    assert "no episodes/ directory" in error()
    episodes_dir(tmp_path).mkdir()
    assert main(["report", str(tmp_path)]) == 2
    assert "no finished episodes yet" in error()
    (episodes_dir(tmp_path) / "x__t__none__seed0.jsonl").write_text('{"type": "header"}\nnot json\n')
    assert main(["report", str(tmp_path)]) == 2
    assert "line 2 is not JSON" in error()
    assert not (tmp_path / "report.md").exists()


def test_a_condition_whose_episodes_all_failed_has_no_summary_but_is_listed(tmp_path):
    episodes_dir(tmp_path).mkdir(parents=True)
    write_episode(tmp_path, EpisodeKey("model-b", "fused_add_rmsnorm", "none", 0), [2, 2])
    write_episode(tmp_path, EpisodeKey("model-b", "fused_add_rmsnorm", "L1+L2+L3", 0), None, status="failed")
    report = build_report(tmp_path).policies[0]
    assert [s.condition for s in report.conditions] == ["none"]
    assert [f["condition"] for f in report.failed] == ["L1+L2+L3"] and report.overall is None


# -- a run whose conditions cover different tasks and seeds ----------------------------------------
# A two-task run (none and L1+L2+L3, seed 0), then a layer study on one task (L1 and L1+L2, seed 0)
# and a second seed of that task without guidance. Only (A, 0) ran under every condition, and it
# is incorrect under all four: the paired stacking is flat. Averaging each condition over whatever
# ran it instead draws a V (none 0.75, L1 0, L1+L2 0, L1+L2+L3 0.5).
A, B = "fused_add_rmsnorm", "merge_attn_states"
UNEVEN = {(A, "none", 0): None, (A, "none", 1): [2, 2], (A, "L1", 0): None, (A, "L1+L2", 0): None,
          (A, "L1+L2+L3", 0): None, (B, "none", 0): [2, 2], (B, "L1+L2+L3", 0): [2, 2]}


@pytest.fixture
def uneven_run(tmp_path):
    episodes_dir(tmp_path).mkdir(parents=True)
    for (task, cond, seed), speedups in UNEVEN.items():
        write_episode(tmp_path, EpisodeKey("model-a", task, cond, seed), speedups)
    return tmp_path


@pytest.fixture
def figures(monkeypatch):
    """Every figure the report saves, by file name, so a test reads what was plotted (not pixels)."""
    from matplotlib.figure import Figure

    saved, original = {}, Figure.savefig

    def record(fig, fname, *args, **kwargs):
        saved[Path(fname).name] = fig
        return original(fig, fname, *args, **kwargs)

    monkeypatch.setattr(Figure, "savefig", record)
    return saved


def _ticks(ax):
    return {round(x): t.get_text() for x, t in zip(ax.get_xticks(), ax.get_xticklabels())}


def bars(ax):
    """(condition, task) -> bar height, for every bar drawn on a grouped bar chart."""
    ticks = _ticks(ax)
    return {(c.get_label(), ticks[round(p.get_x() + p.get_width() / 2)]): p.get_height()
            for c in ax.containers for p in c.patches}


def lines(ax):
    """label -> {x category: y}, for every labelled line."""
    ticks = _ticks(ax)
    return {l.get_label(): {x if isinstance(x, str) else ticks[round(x)]: y for x, y in zip(l.get_xdata(), l.get_ydata())}
            for l in ax.get_lines() if not l.get_label().startswith("_")}


def test_a_cell_never_run_is_plotted_as_missing_not_as_zero(uneven_run, figures):
    from d2k_env.report import write_report

    write_report(uneven_run)
    correctness, speedup = figures["guidance_pairs.png"].axes[:2]
    for ax in (correctness, speedup):
        drawn = bars(ax)
        assert (B, "L1") not in {(t, c) for c, t in drawn}, f"a bar drawn for a cell never run: {drawn}"
        assert (B, "L1+L2") not in {(t, c) for c, t in drawn}
        assert drawn[("L1", A)] == (0.0 if ax is correctness else pytest.approx(1.0))  # ran, all incorrect
        assert sum("not run" in t.get_text() for t in ax.texts) == 2


def test_layer_stacking_is_paired_over_the_tasks_and_seeds_every_condition_ran(uneven_run, figures):
    from d2k_env.report import write_report

    report, _ = write_report(uneven_run)
    correctness, performance = figures["layer_stacking.png"].axes[:2]
    [(label, points)] = lines(correctness).items()
    assert points == {"none": 0.0, "L1": 0.0, "L1+L2": 0.0, "L1+L2+L3": 0.0}  # only (A, seed 0) ran under all four
    assert label.startswith("model-a") and "1 (task, seed) pair" in label
    [(_, speed)] = lines(performance).items()
    assert speed == {c: pytest.approx(1.0) for c in ("none", "L1", "L1+L2", "L1+L2+L3")}
    [p] = report.policies
    assert p.stacking.pairs == [(A, 0)]


def test_uplift_tables_pair_tasks_and_seeds_and_say_how_many_pairs(uneven_run):
    from d2k_env.report import to_markdown

    report = build_report(uneven_run)
    [p] = report.policies
    assert p.overall.pairs == [(A, 0), (B, 0)]  # (A, 1) ran without guidance only
    assert p.overall.correctness_delta == 0.0 and p.overall.performance_ratio == pytest.approx(1.0)
    assert [(u.source, u.target, u.pairs) for u in p.per_layer] == [
        ("none", "L1", [(A, 0)]), ("L1", "L1+L2", [(A, 0)]), ("L1+L2", "L1+L2+L3", [(A, 0)])]
    md = to_markdown(report)
    assert "| overall | none | L1+L2+L3 | 2 (2 tasks) | 50% -> 50%: +0 pp (one seed) |" in md
    assert "| per layer | none | L1 | 1 (1 task) | 0% -> 0%: +0 pp (one seed) |" in md
    for cond in ("L1", "L1+L2"):  # missing cells are rows that say so, never zeros
        assert re.search(rf"\| {B} \| {re.escape(cond)} \| not run \|( - \|)+$", md, re.M), md
    assert "different tasks or seeds" in md  # the unpaired summary warns against comparing its rows
    data = report.to_dict()["policies"][0]
    assert data["uplift"]["overall"]["pairs"] == [[A, 0], [B, 0]]
    assert {(m["task"], m["condition"]) for m in data["missing"]} == {(B, "L1"), (B, "L1+L2")}


def test_a_report_mixing_reward_versions_says_so_and_never_averages_them(tmp_path, capsys):
    episodes_dir(tmp_path).mkdir(parents=True)
    # Under version 1 guidance looks harmful, under version 2 helpful; the unrecorded one predates versions.
    for seed, version, none, guided in ((0, 1, [2, 2], None), (1, 2, None, [2, 2]), (2, None, [2, 2], [2, 2])):
        write_episode(tmp_path, EpisodeKey("model-a", A, "none", seed), none, reward_version=version)
        write_episode(tmp_path, EpisodeKey("model-a", A, "L1+L2+L3", seed), guided, reward_version=version)
    assert main(["report", str(tmp_path)]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "different reward versions (1, 2, unrecorded)" in out
    report = build_report(tmp_path)
    assert report.mixed_reward_versions and report.reward_versions == [1, 2, None]
    assert [(p.policy, p.reward_version) for p in report.policies] == [("model-a", 1), ("model-a", 2), ("model-a", None)]
    deltas = [p.overall.correctness_delta for p in report.policies]
    assert deltas == [-1.0, 1.0, 0.0]  # each version on its own episodes, nothing averaged across them
    assert [p.overall.pairs for p in report.policies] == [[(A, 0)], [(A, 1)], [(A, 2)]]
    md = (tmp_path / "report.md").read_text()
    assert md.index("WARNING") < md.index("## Policy")
    assert "## Policy `model-a`, reward version 2" in md and "## Policy `model-a`, reward version unrecorded" in md
    data = json.loads((tmp_path / "report.json").read_text())
    assert data["mixed_reward_versions"] is True and data["reward_versions"] == [1, 2, None]
    assert [p["reward_version"] for p in data["policies"]] == [1, 2, None]


def test_one_reward_version_is_stated_without_a_warning(timed_run):
    report = build_report(timed_run)
    assert not report.mixed_reward_versions and report.reward_versions == [1]
    from d2k_env.report import to_markdown

    md = to_markdown(report)
    assert "WARNING" not in md and "(reward version 1)" in md


# -- intervals over seeds --------------------------------------------------------------------------

def exact_interval(values):
    """The 2.5th and 97.5th percentiles (inverse empirical distribution) of equally likely ``values``."""
    values, n = sorted(values), len(values)
    return values[math.ceil(0.025 * n) - 1], values[math.ceil(0.975 * n) - 1]


def resampled_condition(cond, draw, tasks=("fused_add_rmsnorm", "merge_attn_states")):
    """Correctness rate and Performance Score of ``cond`` over the seeds ``draw`` (repeats count twice),
    straight from OUTCOMES and the definitions."""
    rates, speedups = [], []
    for task in tasks:
        outcomes = [OUTCOMES[(task, cond, s)] for s in draw]
        rates.append(sum(o is not None for o in outcomes) / len(outcomes))
        speedups.append(geo([geo(o) if o else 1.0 for o in outcomes]))
    return sum(rates) / len(rates), geo(speedups)


def test_intervals_over_two_seeds_are_the_percentiles_of_all_four_resamples(timed_run):
    import itertools

    report = build_report(timed_run)
    [p] = report.policies
    draws = list(itertools.product((0, 1), repeat=2))  # every resample of two seeds, each as likely
    for s in p.conditions:
        rates, scores = zip(*(resampled_condition(s.condition, d) for d in draws))
        assert s.seeds == 2
        assert s.correctness_interval == pytest.approx(exact_interval(rates)), s.condition
        assert s.performance_interval == pytest.approx(exact_interval(scores)), s.condition
    deltas, ratios = [], []
    for d in draws:
        (r0, p0), (r1, p1) = resampled_condition("none", d), resampled_condition("L1+L2+L3", d)
        deltas.append(r1 - r0)
        ratios.append(p1 / p0)
    assert p.overall.correctness_delta_interval == pytest.approx(exact_interval(deltas)) == (0.5, 1.0)
    assert p.overall.performance_ratio_interval == pytest.approx(exact_interval(ratios))
    md = to_markdown(report)
    lo, hi = exact_interval([resampled_condition("L1+L2+L3", d)[1] for d in draws])
    assert f"| L1+L2+L3 | 2 | 4 | 100% [100-100%] | {geo([geo([16, 8]), 3]):.2f}x [{lo:.2f}-{hi:.2f}x] |" in md
    data = json.loads(json.dumps(report.to_dict()))
    assert data["intervals"] == {"resampled": "seeds", "level": 0.95, "resamples": 2000}
    assert data["policies"][0]["uplift"]["overall"]["correctness_delta_interval"] == [0.5, 1.0]
    assert data["policies"][0]["conditions"][0]["correctness_interval"] == [0.0, 0.5]


def test_a_value_on_one_seed_has_no_interval_and_says_so(uneven_run):
    report = build_report(uneven_run)
    [p] = report.policies
    by = {s.condition: s for s in p.conditions}
    assert by["none"].seeds == 2 and by["none"].correctness_interval is not None  # (A, 1) ran without guidance
    assert (by["L1"].seeds, by["L1"].correctness_interval, by["L1"].performance_interval) == (1, None, None)
    assert p.overall.correctness_delta_interval is None and p.overall.performance_ratio_interval is None
    md = to_markdown(report)
    assert "| L1 | 1 | 1 | 0% (one seed) | 1.00x (one seed) | n/a |" in md
    assert "[0-0%]" not in md and "[+0 to +0 pp]" not in md  # never a made-up zero-width interval


def test_the_report_and_its_intervals_are_reproducible(timed_run):
    from d2k_env.trajectory import json_safe

    first, second = (json_safe(build_report(timed_run).to_dict()) for _ in range(2))  # NaN != NaN: compare as JSON
    assert first == second and first["policies"][0]["conditions"][0]["correctness_interval"] == [0.0, 0.5]


def test_the_stacking_plot_draws_each_seed_interval(timed_run, figures):
    from d2k_env.report import write_report

    report, _ = write_report(timed_run)
    [p] = report.policies
    for ax, attr in zip(figures["layer_stacking.png"].axes, ("correctness_interval", "performance_interval")):
        drawn = sorted(tuple(map(tuple, segment)) for c in ax.collections for segment in c.get_segments())
        assert drawn == pytest.approx(sorted(((x, getattr(s, attr)[0]), (x, getattr(s, attr)[1]))
                                             for x, s in enumerate(p.stacking.summaries)))


def test_seed_interval_resamples_whole_seeds_and_skips_undefined_resamples():
    import itertools

    from d2k_env.bootstrap import seed_interval

    # Five seeds of two tasks; a seed's value is the same on both, so a seed drawn brings two equal pairs.
    value = {0: 0.0, 1: 0.0, 2: 0.0, 3: 0.0, 4: 1.0}
    pairs = [(task, seed) for seed in value for task in ("a", "b")]

    def mean(rs):
        assert len(rs) == len(pairs) and {sum(s == seed for _, s in rs) % 2 for seed in value} == {0}  # whole seeds
        return sum(value[s] for _, s in rs) / len(rs)

    def mean_unless_one_seed(rs):  # undefined on the 5 resamples that draw one seed five times
        return None if len({s for _, s in rs}) == 1 else mean(rs)

    draws = list(itertools.product(value, repeat=5))  # all 3125 resamples, each as likely
    assert seed_interval(pairs, mean, resamples=len(draws)) == exact_interval(
        [sum(value[s] for s in d) / 5 for d in draws]) == (0.0, 0.6)
    assert seed_interval(pairs, mean_unless_one_seed, resamples=len(draws)) == exact_interval(
        [sum(value[s] for s in d) / 5 for d in draws if len(set(d)) > 1])
    sampled = seed_interval(pairs, mean)  # 2000 < 3125: drawn from a fixed generator
    assert sampled == seed_interval(pairs, mean) and 0.0 <= sampled[0] <= sampled[1] <= 1.0
    assert seed_interval([("a", 3), ("b", 3)], mean_unless_one_seed) is None  # one seed: no interval
    assert seed_interval(pairs, lambda rs: None if ("a", 4) not in rs else 1.0) is None  # mostly undefined
    with pytest.raises(ValueError, match="level must lie strictly between 0 and 1"):
        seed_interval(pairs, mean, level=95)
