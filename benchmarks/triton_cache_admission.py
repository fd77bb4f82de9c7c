"""What honest evaluations put in a Triton cache, against the limits under which it is admitted.

The evaluator's cache admits only Triton's layout, within entry, file and byte limits
(d2k_env/evaluator/cache_copy.py): an honest evaluation must fit them, or its kernels are compiled
again at every evaluation. For each task's reference and each autotuned file of the honest corpus
(the most entries an honest solution makes), two submits with one evaluator and a fresh cache:
what each worker's cache held when its entries were taken back (entries, the most files in one,
MiB: the seeded entries included), what the evaluator's cache admitted, and both wall times (the
second, seeded from the first, should not be slower: nothing compiled again).

    python benchmarks/triton_cache_admission.py [--backend cuda] [--task ID ...]

Prints one JSON line per file, then the limits.
"""

from __future__ import annotations

import argparse
import glob
import json
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import d2k_env.evaluator as evaluator_module  # noqa: E402
from d2k_env.evaluator import Evaluator, cache_copy  # noqa: E402
from d2k_env.removal import remove_tree  # noqa: E402
from d2k_env.task import load_task, task_ids  # noqa: E402

LIMITS = ("HARVEST_ENTRIES", "HARVEST_LIMIT_BYTES", "ENTRY_LIMIT", "CACHE_LIMIT_BYTES", "FILES_PER_ENTRY")


def census(cache: Path) -> dict:
    """Entries (directories), the most names in one, and the MiB of their files (an honest cache: small)."""
    entries = [p for p in cache.iterdir() if p.is_dir() and not p.is_symlink()]
    names = [len(list(p.iterdir())) for p in entries]
    size = sum(f.stat().st_size for p in entries for f in p.iterdir() if f.is_file())
    return {"entries": len(entries), "most_names": max(names, default=0), "MiB": round(size / 2**20, 2)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", default="cuda")
    parser.add_argument("--task", action="append", help="a task id (repeatable; default: every task)")
    args = parser.parse_args()
    seen: list[dict] = []  # each worker's cache, as the harvest found it
    harvest = evaluator_module.harvest_cache

    def recording(worker_cache: Path, cache: Path) -> int:
        seen.append(census(worker_cache))
        return harvest(worker_cache, cache)
    evaluator_module.harvest_cache = recording

    for task_id in args.task or task_ids():
        task = load_task(task_id)
        for path in [task.reference_path, *sorted(glob.glob(str(ROOT / "tests/security/honest_corpus"
                                                                / task_id / "autotune*.py")))]:
            cache = Path(tempfile.mkdtemp(prefix="d2k-cache-admission-"))
            ev = Evaluator(task, args.backend, cache_dir=cache)
            seconds, correct = [], []
            try:
                for _ in range(2):
                    started = time.monotonic()
                    result = ev.evaluate(path, mode="submit")
                    seconds.append(round(time.monotonic() - started, 2))
                    correct.append(result.correct)
                print(json.dumps({"task": task_id, "file": Path(path).name, "correct": correct, "seconds": seconds,
                                  "workers": seen, "admitted": census(cache)}), flush=True)
            finally:
                ev.close()
                remove_tree(cache)
                seen.clear()
    print(json.dumps({name: getattr(cache_copy, name) for name in LIMITS}))


if __name__ == "__main__":
    main()
