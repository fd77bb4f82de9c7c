"""Progress of an experiment, for whoever watches it: ``d2k run`` and ``run_experiment`` alike.

A reporter implements the :class:`~d2k_env.runner.RunCallback` hooks and is a context manager that
``run_experiment`` enters around the run. It reports each episode as it starts and ends (verdict,
speedup, reward, steps, tokens; the error of a failed one), the count done so far, a resumed run's
skipped episodes and an interruption. :func:`progress_reporter` picks one:

- ``"auto"`` (the default of ``run_experiment``): a live rich progress bar when the stream is a
  terminal, plain lines otherwise (a log file, a notebook's captured output, CI);
- ``"rich"`` / ``"lines"``: that one whatever the stream;
- ``"quiet"``: none.

Messages are built as styled :class:`rich.text.Text`, never as markup strings: an error message or
a policy name holding brackets is printed as it is, and the plain reporter prints the same words
without styles.
"""

from __future__ import annotations

import threading
from typing import Any, TextIO

from rich.console import Console
from rich.progress import BarColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn
from rich.text import Text

from d2k_env.wording import plural

MODES = ("auto", "rich", "lines", "quiet")


def episode_text(key: Any, summary: dict[str, Any]) -> Text:
    """One ended episode: ``<key>: correct, speedup 2.10x, reward 2.100, 12 steps, 3400 tokens``,
    or ``<key>: failed: <error>``; a design-only one ``<key>: design submitted, judged 4/6
    realised, ...`` (the judge's part when it gave a verdict)."""
    if summary["status"] != "finished":
        return Text.assemble(f"{key}: ", ("failed", "red"), f": {summary['error']}")
    verdict = ("correct", "green") if summary["correct"] else ("not correct", "red")
    if "submitted_design" in summary:  # a design-only episode: nothing to be correct
        verdict = ("design submitted", "green") if summary["submitted"] else ("no design submitted", "red")
    judged = [p["score"] for p in (summary.get("judge") or {}).get("properties", [])]
    grade = f", judged {judged.count('realised')}/{len(judged)} realised" if judged else ""
    speed = f", speedup {summary['speedup']:.2f}x" if summary["speedup"] is not None else ""
    return Text.assemble(f"{key}: ", verdict, f"{speed}{grade}, reward {summary['total_reward']:.3f}, "
                         f"{plural(summary['steps'], 'step')}, {plural(summary['tokens']['total_tokens'], 'token')}")


class ProgressReporter:
    """Counts episodes (thread-safe: hooks arrive from episode threads) and says what happened.
    Subclasses say how: :meth:`_emit` a message, :meth:`_changed` after every count change."""

    def __init__(self):
        self.planned = self.done = self.running = self.failed = 0
        self._lock = threading.Lock()

    def __enter__(self) -> "ProgressReporter":
        return self

    def __exit__(self, *exc) -> None:
        pass

    def _emit(self, text: Text) -> None:
        raise NotImplementedError

    def _changed(self) -> None:
        pass

    def _count(self) -> str:
        return f"{self.done + self.failed}/{self.planned}"

    def on_run_start(self, planned: int, skipped: int) -> None:
        with self._lock:
            self.planned, self.done = planned, skipped
            self._changed()
        if skipped:
            self._emit(Text(f"resuming: {skipped} of {plural(planned, 'episode')} already finished, skipped"))

    def on_episode_start(self, key) -> None:
        with self._lock:
            self.running += 1
            self._changed()

    def on_step(self, key, record) -> None:
        pass

    def on_episode_end(self, key, header, summary) -> None:
        with self._lock:
            self.running -= 1
            if summary["status"] == "finished":
                self.done += 1
            else:
                self.failed += 1
            self._changed()
            count = self._count()
        self._emit(Text.assemble(f"[{count}] ", episode_text(key, summary)))

    def on_episode_stopped(self, key) -> None:
        with self._lock:
            self.running -= 1
            self._changed()

    def on_interrupt(self) -> None:
        self._emit(Text("stopping: no new episodes; running ones stop after their current step "
                        "(Ctrl-C again to quit at once)", style="yellow"))


class RichProgress(ProgressReporter):
    """A live bar of episodes done, running and failed, with one line per ended episode above it."""

    def __init__(self, console: Console):
        super().__init__()
        columns = (SpinnerColumn(), TextColumn("{task.description}"), BarColumn(),
                   TextColumn("{task.completed}/{task.total}"), TimeElapsedColumn())
        self.progress = Progress(*columns, console=console)
        self._bar = None  # added once the run says how many episodes it plans

    def __enter__(self) -> "RichProgress":
        self.progress.start()
        return self

    def __exit__(self, *exc) -> None:
        self.progress.stop()

    def _changed(self) -> None:
        if self._bar is None:
            self._bar = self.progress.add_task("episodes", total=self.planned)
        self.progress.update(self._bar, total=self.planned, completed=self.done,
                             description=f"episodes: {self.done} done, {self.running} running, {self.failed} failed")

    def _emit(self, text: Text) -> None:
        self.progress.console.print(text)


class LineProgress(ProgressReporter):
    """Plain lines, one per event, flushed at once so a log being followed shows them as they come."""

    def __init__(self, file: TextIO):
        super().__init__()
        self.file = file
        self._write = threading.Lock()

    def on_episode_start(self, key) -> None:
        with self._lock:
            self.running += 1
            running = self.running
        self._emit(Text(f"started {key} ({running} running)"))

    def _emit(self, text: Text) -> None:
        with self._write:
            print(text.plain, file=self.file, flush=True)


def progress_reporter(mode: str = "auto", file: TextIO | None = None) -> ProgressReporter | None:
    """The reporter for ``mode`` (one of :data:`MODES`) writing to ``file`` (default: standard error,
    so that standard output stays the caller's); ``None`` for ``"quiet"``."""
    if mode not in MODES:
        raise ValueError(f"unknown progress mode {mode!r}; expected one of {MODES}")
    if mode == "quiet":
        return None
    console = Console(file=file, stderr=file is None, highlight=False)
    if mode == "rich" or (mode == "auto" and console.is_terminal):
        return RichProgress(console)
    return LineProgress(console.file)
