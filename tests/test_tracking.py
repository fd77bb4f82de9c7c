"""The wandb tracker offline (issue 26, item 5): a run group per experiment, tags per condition and
the report's plots as images, read back from the run's own log. Needs wandb (the ``agents`` extra)."""

import pytest

pytest.importorskip("wandb")
import wandb_records  # noqa: E402 - after the skip: it imports wandb's protobufs


def test_a_run_has_its_group_its_tags_and_the_plots_as_images(tmp_path, monkeypatch):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    import wandb

    from d2k_env.tracking import WandbTracker

    for name, value in (("WANDB_MODE", "offline"), ("WANDB_SILENT", "true"),
                        ("WANDB_CONFIG_DIR", tmp_path / "config"), ("WANDB_CACHE_DIR", tmp_path / "cache"),
                        ("WANDB_DATA_DIR", tmp_path / "data")):
        monkeypatch.setenv(name, str(value))
    plot = tmp_path / "guidance_pairs.png"
    figure = plt.figure(figsize=(2, 2))
    figure.gca().bar(["none", "L1"], [0.5, 1.0])
    figure.savefig(plot)
    plt.close(figure)

    tracker = WandbTracker("d2k-tests", {"tasks": ["fused_add_rmsnorm"]}, tmp_path / "run", group="experiment-1",
                           tags=["guidance:L1", "guidance:none"])
    tracker.log_plots([plot])
    tracker.finish()
    wandb.teardown()  # the log is complete once wandb's service has ended (as at a process's exit)

    log = next((tmp_path / "run" / "wandb").glob("offline-run-*/run-*.wandb"))
    assert wandb_records.run(log) == {"group": "experiment-1", "tags": ["guidance:L1", "guidance:none"]}
    (image,) = [h for h in wandb_records.history(log) if "plots/guidance_pairs/_type" in h]
    assert image["plots/guidance_pairs/_type"] == "image-file" and image["plots/guidance_pairs/format"] == "png"
    assert list(log.parent.glob("files/media/images/plots/guidance_pairs_*.png"))
