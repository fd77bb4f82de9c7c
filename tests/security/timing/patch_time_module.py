"""Task: every
Backend: interpreter
Base: reference
Expect: paid
Round: redteam c05

Under the trust boundary (issue 25) this changes nothing: the cheat acts on the recording process,
which measures and checks nothing; the trusted replay runs the file's kernels, which are honest,
on the secret inputs, so it is paid what the honest kernel is paid.

THREATS class 5 (timer monkeypatching): patch time.perf_counter, which the harness uses for its
time budget. The time module is not importable ([forbidden-import]).

A template: appended to each registered task's reference.
"""

import time

time.perf_counter = lambda: 0.0
