"""Task: every
Backend: interpreter
Base: reference
Expect: "forward raised"
Behind the policy: "forward raised"
Mode: test
Limits: short
Check: recovers, no-child-process
Round: redteam c19

THREATS class 19 (stray processes): fork a few children that sleep (bounded: LIFETIME seconds) while
holding the harness's pipes, each writing its pid to PID_DIR (substituted by the test; left as the
placeholder, nothing is forked). Statically: os is not importable ([forbidden-import]). Behind the
policy (bypassed on purpose by the test): the children keep the result channel open, so the phase
limit fires ("exceeded its N s limit"), and the kill of the process group must leave no child alive.

SAFETY: at most CHILDREN children, each exits after LIFETIME seconds on its own.

A template: appended to each registered task's reference, whose forward it wraps as _reference_forward.
"""

import os
import time

PID_DIR = "@PID_DIR@"
CHILDREN = 3
LIFETIME = 30
_STATE = {"forked": False}


def _spawn():
    for _ in range(CHILDREN):
        if os.fork() == 0:
            with open(os.path.join(PID_DIR, f"{os.getpid()}.pid"), "w") as f:
                f.write(str(os.getpid()))
            time.sleep(LIFETIME)
            os._exit(0)


def forward(*inputs):
    if not PID_DIR.startswith("@") and not _STATE["forked"]:
        _STATE["forked"] = True
        _spawn()
    return _reference_forward(*inputs)
