"""Whether a baseline's measured time can be believed, against its roofline and earlier runs.

The speedup a solution is paid for is the baseline's median over the solution's, both timed in the
solution's run. The solution's side is checked against its roofline floor; the baseline's side needs
a check too: anything that slows the baseline alone (another process's kernels overlapping its
calls; three evaluations at once doubled a quant baseline on one H100) inflates the speedup. So each
baseline median is compared with

- its roofline floor: a time under it cannot be a real measurement;
- this device's earlier medians of the same baseline (:class:`BaselineTimes`, keyed by device
  name, torch version, task and workload): a time more than ``BAND`` away is suspect.

The evaluator re-measures a suspect workload once (see ``Evaluator._revalidate_baselines``) and the
result says when and why. Only believed times enter the cache.
"""

from __future__ import annotations

import fcntl
import json
import os
import statistics
import tempfile
import warnings
from pathlib import Path

ROOFLINE_SLACK = 0.10  # a time may undercut its floor by this much (ceilings are measured, with noise)
# Relative distance from the earlier median past which a baseline time is suspect. Separate runs of
# one workload repeat within 0.8% (large) and 6-9% (launch-bound, 64 rows) on the H200
# (../shared/MEASURING.md); the slowdown under contention was 2x.
BAND = 0.25
KEEP = 9  # earlier medians kept per key: the newest
CACHE_ENV = "D2K_BASELINE_CACHE"  # where the cache file lives, when set


def default_path() -> Path:
    """``$D2K_BASELINE_CACHE``, else ``d2k-env/baseline-times.json`` in the user's cache directory."""
    if os.environ.get(CACHE_ENV):
        return Path(os.environ[CACHE_ENV])
    root = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return root / "d2k-env" / "baseline-times.json"


def cache_key(device: str, torch_version: str, task: str, workload: str) -> str:
    return f"{device}|torch {torch_version}|{task}|{workload}"


class BaselineTimes:
    """Earlier baseline medians in a JSON file shared by the processes of one user: ``{key: [ms, ...]}``,
    the newest ``KEEP`` per key. Reads and writes hold an ``flock`` on a lock file beside it; a
    write replaces the file whole. An unreadable or malformed file counts as empty (and is replaced at
    the next write), and a write that fails is skipped with a warning: the cache can only make a check
    stricter, never decide a verdict alone, nor stop an evaluation."""

    def __init__(self, path: str | Path | None = None):
        self.path = Path(path) if path is not None else default_path()

    def earlier(self, key: str) -> list[float]:
        try:
            with self._locked(fcntl.LOCK_SH):
                return self._read().get(key, [])
        except OSError:
            return []

    def record(self, key: str, ms: float, restart: bool = False) -> None:
        """Add ``ms`` to ``key``'s medians (``restart``: in place of them)."""
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with self._locked(fcntl.LOCK_EX):
                data = self._read()
                data[key] = ([] if restart else data.get(key, []))[-(KEEP - 1):] + [float(ms)]
                fd, tmp = tempfile.mkstemp(prefix=".baseline-times-", dir=self.path.parent)
                try:
                    with os.fdopen(fd, "w") as f:
                        json.dump(data, f, indent=1, sort_keys=True)
                    os.replace(tmp, self.path)
                except BaseException:
                    os.unlink(tmp)
                    raise
        except OSError as exc:
            warnings.warn(f"d2k-env: the baseline times cache {self.path} could not be written ({exc})",
                          RuntimeWarning, stacklevel=2)

    def _read(self) -> dict[str, list[float]]:
        try:
            data = json.loads(self.path.read_text())
        except (OSError, ValueError):
            return {}
        if not isinstance(data, dict):
            return {}
        return {k: [float(x) for x in v if isinstance(x, (int, float)) and x > 0]
                for k, v in data.items() if isinstance(v, list)}

    def _locked(self, how: int):
        return _FileLock(self.path.with_name(self.path.name + ".lock"), how)


class _FileLock:
    def __init__(self, path: Path, how: int):
        self.path, self.how, self.fd = path, how, -1

    def __enter__(self):
        if self.path.parent.is_dir():
            self.fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
            fcntl.flock(self.fd, self.how)
        return self

    def __exit__(self, *exc):
        if self.fd >= 0:
            os.close(self.fd)


def suspect(baseline_ms: float, floor_ms: float | None, earlier: list[float]) -> str | None:
    """Why ``baseline_ms`` cannot be believed as it is, or None: under its roofline floor
    (``floor_ms``), or more than ``BAND`` away from the median of this device's ``earlier`` times."""
    if floor_ms and baseline_ms < (1 - ROOFLINE_SLACK) * floor_ms:
        return f"{baseline_ms:.4f} ms is under its roofline floor ({floor_ms:.4f} ms)"
    if earlier:
        median = statistics.median(earlier)
        if not median / (1 + BAND) <= baseline_ms <= median * (1 + BAND):
            off = baseline_ms / median - 1
            return (f"{baseline_ms:.4f} ms is {abs(off):.0%} {'above' if off > 0 else 'below'} this device's "
                    f"earlier median of {median:.4f} ms ({len(earlier)} run(s))")
    return None


def agree(a: float, b: float) -> bool:
    """Whether two measurements of one baseline agree within the band."""
    return max(a, b) <= min(a, b) * (1 + BAND)
