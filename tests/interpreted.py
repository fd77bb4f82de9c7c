"""Scripts under Triton's CPU interpreter, each in a fresh process that did not pay for its imports.

A check of the interpreter (or of the patch d2k applies to it) must run in a process of its own:
Triton reads TRITON_INTERPRET when a kernel is decorated, and the patch changes the interpreter for
the whole process. Starting Python for each script costs 3 to 4 s of CPU (torch and Triton); so one
runner process imports them once, with TRITON_INTERPRET=1, and forks a child per script, which runs
it as ``__main__`` and exits: every script still starts from a process in which nothing ran.
"""

from __future__ import annotations

import os
import select
import signal
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

RUNNER = r"""
import os, runpy, sys, traceback
import torch, triton, triton.language  # what every script imports: paid once, before any fork

for line in sys.stdin:
    script = line.rstrip("\n")
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            for fd, name in ((1, ".stdout"), (2, ".stderr")):
                os.dup2(os.open(script + name, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), fd)
            sys.argv = [script]
            runpy.run_path(script, run_name="__main__")
            code = 0
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else (exc.code is not None)
        except BaseException:
            traceback.print_exc()
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(code)
    print(os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]), flush=True)
"""


class InterpretedScripts:
    """:meth:`run` runs a script file under the interpreter (``TRITON_INTERPRET=1``, the project
    on ``PYTHONPATH``) in a forked child of one warm runner, and returns what ``subprocess.run``
    would have: its exit status, stdout and stderr. A script that outlives its timeout takes the
    runner down with it (the next call starts a new one)."""

    def __init__(self):
        self._proc: subprocess.Popen | None = None

    def _runner(self) -> subprocess.Popen:
        if self._proc is None or self._proc.poll() is not None:
            env = {**os.environ, "TRITON_INTERPRET": "1",
                   "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
            self._proc = subprocess.Popen([sys.executable, "-c", RUNNER], cwd=ROOT, env=env, text=True,
                                          stdin=subprocess.PIPE, stdout=subprocess.PIPE, start_new_session=True)
        return self._proc

    def run(self, script: Path, timeout: float = 300) -> subprocess.CompletedProcess:
        """``script``: a file (``@triton.jit`` reads a kernel's source from it); its output goes to
        files beside it."""
        script = Path(script).resolve()
        proc = self._runner()
        proc.stdin.write(f"{script}\n")
        proc.stdin.flush()
        if not select.select([proc.stdout], [], [], timeout)[0]:
            self.close()
            raise subprocess.TimeoutExpired(str(script), timeout)
        line = proc.stdout.readline()
        if not line:
            raise RuntimeError(f"the interpreter's runner died (status {proc.wait()})")
        out, err = (Path(f"{script}.{name}").read_text(errors="replace") for name in ("stdout", "stderr"))
        return subprocess.CompletedProcess([str(script)], int(line), out, err)

    def close(self) -> None:
        if self._proc is not None:
            try:
                os.killpg(self._proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self._proc.wait()
            self._proc = None
