"""The static policy, run in a child process with a time limit, so that no source holds the env.

Some sources make the policy's analysis super-linear (a 91 KB one took the env's own process 23 s,
longer ones minutes), and a parser fault on a pathological source would take the env down with
it. :func:`check_solution` has :func:`d2k_env.evaluator.policy.check_solution`'s contract, but the
analysis runs in a long-lived child (started by :func:`start` or on first use, importing torch and
Triton once): an analysis over :data:`TIME_LIMIT_S` is a ``[policy-time]`` violation, the child is
killed and the next call starts another. One analysis at a time per env process (a lock), so
threads never mix their answers.

Usage of the child (this module only): ``python -m d2k_env.evaluator.policy_service``, one JSON
request per line on stdin (``{"source": ..., "allowed": [...]}``), one JSON answer per line on
stdout (``[[rule, line, message], ...]``).
"""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
import threading
import time

from d2k_env.evaluator.rules import Violation

TIME_LIMIT_S = 10.0
START_LIMIT_S = 120.0  # the first answer waits for the child's imports too
_ANSWER_LIMIT = 16 * 2**20  # bytes of one answer; more is a broken child


class _Service:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.proc: subprocess.Popen | None = None
        self.fresh = False

    def start(self) -> None:
        with self.lock:
            self._ensure_running()

    def _ensure_running(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            self._start()

    def check(self, source: str, allowed: frozenset[str]) -> list[Violation]:
        with self.lock:
            self._ensure_running()
            limit = START_LIMIT_S if self.fresh else TIME_LIMIT_S
            answer, why = self._ask(json.dumps({"source": source, "allowed": sorted(allowed)}), limit)
            if answer is None:
                self._stop()
                return [Violation("policy-time", 1, f"the policy could not analyse solution.py: {why}; "
                                                    f"simplify the source")]
            self.fresh = False
            return [Violation(rule, line, message) for rule, line, message in answer]

    def _start(self) -> None:
        # Its own session: a Ctrl-C meant for the env does not kill it mid-answer; it ends when
        # the env closes its stdin (the env exited) or kills it (an analysis over the limit).
        self.proc = subprocess.Popen([sys.executable, "-m", __name__], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.DEVNULL, start_new_session=True)
        self.fresh = True

    def _ask(self, request: str, limit: float) -> tuple[list | None, str]:
        """The child's answer, or None and why there is none."""
        try:
            self.proc.stdin.write(request.encode() + b"\n")
            self.proc.stdin.flush()
        except OSError:
            return None, "the analysis process died"
        out, fd = b"", self.proc.stdout.fileno()
        deadline = time.monotonic() + limit
        while not out.endswith(b"\n"):
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([fd], [], [], left)[0]:
                return None, f"the analysis took longer than {limit:.0f} s"
            chunk = os.read(fd, 65536)
            if not chunk or len(out) > _ANSWER_LIMIT:
                return None, "the analysis process died"
            out += chunk
        try:
            return json.loads(out), ""
        except ValueError:
            return None, "the analysis process gave no answer"

    def _stop(self) -> None:
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait()
            self.proc = None


_service = _Service()


def start() -> None:
    """Start the analysis child now unless one runs, and return at once: its imports (seconds) then
    overlap the caller's own start-up instead of delaying the first :func:`check_solution`."""
    _service.start()


def check_solution(source: str, allowed_torch: frozenset[str] = frozenset()) -> list[Violation]:
    """All policy violations in ``source``, from a child process with a time limit."""
    return _service.check(source, frozenset(allowed_torch))


def main() -> None:
    from d2k_env.evaluator.policy import check_solution as analyse
    for line in sys.stdin:
        request = json.loads(line)
        try:
            violations = analyse(request["source"], frozenset(request["allowed"]))
        except Exception as exc:  # noqa: BLE001 - an analysis that breaks refuses the source, never the env
            violations = [Violation("syntax", 1, f"the policy could not analyse solution.py ({type(exc).__name__})")]
        sys.stdout.write(json.dumps([[v.rule, v.line, v.message] for v in violations]) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
