"""Task: every
Backend: interpreter
Base: reference
Expect: any
Round: redteam c05

THREATS class 5 (timer monkeypatching): patch time.perf_counter, which the harness uses for its
time budget. The time module is not importable ([forbidden-import]).

A template: appended to each registered task's reference.
"""

import time

time.perf_counter = lambda: 0.0
