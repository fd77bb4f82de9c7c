"""Task: every
Backend: interpreter
Base: reference
Expect: paid
Round: redteam c05

Under the trust boundary (issue 25) this changes nothing: the cheat acts on the recording process,
which measures and checks nothing; the trusted replay runs the file's kernels, which are honest,
on the secret inputs, so it is paid what the honest kernel is paid.

THREATS class 5 (timer monkeypatching): assign torch.cuda.synchronize, Event.elapsed_time and
torch.equal directly (a correct kernel otherwise). The static policy must refuse assignments to torch
attributes ([tampering]).

A template: appended to each registered task's reference.
"""

torch.cuda.synchronize = lambda *args, **kwargs: None
torch.cuda.Event.elapsed_time = lambda self, end: 1e-6
torch.equal = lambda a, b: True
