"""Task: every
Backend: interpreter
Base: reference
Expect: "forward raised"
Behind the policy: "forward raised"
Mode: test
Limits: short
Check: recovers, no-child-process
Round: redteam c19

THREATS class 19 (stray processes that outlive the evaluation): like c19_fork_children, but each child
calls os.setsid() (leaving the evaluation's session and process group) and closes the inherited pipes,
so the evaluation itself finishes normally and the harness's kill of the process group does not reach
it. Statically: os is not importable ([forbidden-import]); this tests the sandbox behind the policy
(bypassed on purpose by the test), which any policy escape (see c06_attrgetter_escape,
c13_torch_os_via_assignment_alias) would reach. No child may survive the evaluation.

SAFETY: at most CHILDREN children, each exits after LIFETIME seconds on its own; the test kills the ones
it finds alive, by pid. Left as the placeholder, PID_DIR makes it fork nothing.

A template: appended to each registered task's reference, whose forward it wraps as _reference_forward.
"""

import os
import time

PID_DIR = "@PID_DIR@"
CHILDREN = 2
LIFETIME = 30
_STATE = {"forked": False}


def _spawn():
    for _ in range(CHILDREN):
        if os.fork() == 0:
            os.setsid()
            os.closerange(0, 4096)
            with open(os.path.join(PID_DIR, f"{os.getpid()}.pid"), "w") as f:
                f.write(str(os.getpid()))
            time.sleep(LIFETIME)
            os._exit(0)
    deadline = time.monotonic() + 5
    while len(os.listdir(PID_DIR)) < CHILDREN and time.monotonic() < deadline:
        time.sleep(0.05)


def forward(*inputs):
    if not PID_DIR.startswith("@") and not _STATE["forked"]:
        _STATE["forked"] = True
        _spawn()
    return _reference_forward(*inputs)
