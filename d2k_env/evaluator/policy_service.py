"""The static policy, run in a child process with a time limit, so that no source holds the env.

Some sources make the policy's analysis super-linear (a 91 KB one took the env's own process 23 s,
longer ones minutes), and a parser fault on a pathological source would take the env down with
it. :func:`check_solution` has :func:`d2k_env.evaluator.policy.check_solution`'s contract, but the
analysis runs in a long-lived child (started by :func:`start` or on first use, importing torch and
Triton once): an analysis over :data:`TIME_LIMIT_S` is a ``[policy-time]`` violation, the child is
killed and a replacement starts at once. Each child answers one check at a time; a check that
finds the child busy for over :data:`WAIT_S` starts one of its own, so one source's slow analysis
stalls no other check of the process (the lanes of a service, the sessions of a server): with one
child behind a lock, an honest check once waited 123 s behind a timed-out one and the restart.

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
WAIT_S = 1.0  # a check waits this long for the busy child before it starts one of its own


class _Child:
    """One analysis process, answering one check at a time."""

    def __init__(self) -> None:
        # Its own session: a Ctrl-C meant for the env does not kill it mid-answer; it ends when
        # the env closes its stdin (the env exited) or kills it (an analysis over the limit).
        self.proc = subprocess.Popen([sys.executable, "-m", __name__], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.DEVNULL, start_new_session=True)
        self.fresh = True  # its first answer waits for its imports too

    def alive(self) -> bool:
        return self.proc.poll() is None

    def ask(self, request: str, limit: float) -> tuple[list | None, str]:
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

    def stop(self) -> None:
        self.proc.kill()
        self.proc.wait()
        self.proc.stdin.close()
        self.proc.stdout.close()


class _Service:
    """The process's analysis children. A check takes the idle child; when it is busy, the check
    waits for it up to :data:`WAIT_S` (an analysis takes milliseconds, so a burst is answered by
    the warm child in turn), then starts a child of its own, so that one source's slow analysis (up
    to its time limit, then the restart) holds up no other check. One child stays warm after."""

    def __init__(self) -> None:
        self.cond = threading.Condition()
        self.idle: list[_Child] = []
        self.busy = 0

    def start(self) -> None:
        """Start a child unless one is alive (it imports in the background)."""
        with self.cond:
            self._prune()
            if not self.idle and not self.busy:
                self.idle.append(_Child())

    def check(self, source: str, allowed: frozenset[str]) -> list[Violation]:
        child = self._take()
        limit = START_LIMIT_S if child.fresh else TIME_LIMIT_S
        answer, why = child.ask(json.dumps({"source": source, "allowed": sorted(allowed)}), limit)
        if answer is not None:
            child.fresh = False
        self._give_back(child, answer is not None)
        if answer is None:
            return [Violation("policy-time", 1, f"the policy could not analyse solution.py: {why}; "
                                                f"simplify the source")]
        return [Violation(rule, line, message) for rule, line, message in answer]

    def stop(self) -> None:
        """End the idle children (a check in flight keeps its own until it answers)."""
        with self.cond:
            idle, self.idle = self.idle, []
        for child in idle:
            child.stop()

    def _take(self) -> _Child:
        deadline = time.monotonic() + WAIT_S
        with self.cond:
            while True:
                self._prune()
                if self.idle:
                    self.busy += 1
                    return self.idle.pop()
                left = deadline - time.monotonic()
                if not self.busy or left <= 0:
                    break
                self.cond.wait(left)
            self.busy += 1
        try:
            return _Child()
        except BaseException:
            with self.cond:
                self.busy -= 1
            raise

    def _give_back(self, child: _Child, healthy: bool) -> None:
        """Keep ``child`` warm if it answered and none is kept yet; else end it. After a child that
        failed, a replacement starts at once (its imports then overlap the next check's wait)."""
        with self.cond:
            self.busy -= 1
            keep = healthy and not self.idle
            if keep:
                self.idle.append(child)
            self.cond.notify_all()
        if not keep:
            child.stop()
        if not healthy:
            self.start()

    def _prune(self) -> None:
        """Drop the idle children that died (the caller holds the lock)."""
        for child in [c for c in self.idle if not c.alive()]:
            self.idle.remove(child)
            child.stop()


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
