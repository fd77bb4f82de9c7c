"""The task-author API: what a task spec file (``tasks/<id>.py``) imports.

    from d2k_env.tasks import Output, PerOutput, Heldout, Roofline, TaskSpec, Workload

    TASK = TaskSpec(title=..., outputs=[Output("y", torch.bfloat16)], ..., heldout=Heldout(...))

Importing it loads torch (checkers compare tensors); ``import d2k_env`` does not import it: a task
is only loaded when it is made or evaluated. ``d2k new-task ID`` writes a commented spec.
"""

from d2k_env.task import CheckResult, Roofline, Workload
from d2k_env.tasks.accumulation import AccumulationBound
from d2k_env.tasks.checks import (CANCELLATION_FLOOR, FLOAT_TOLERANCES, Alternative, Check, Exact, OneStep,
                                  OutputCheck, PerOutput, Quantised, RelativeError, SampleAgreement, Tolerance,
                                  compare_output, default_check, dtype_step)
from d2k_env.tasks.in_place import UpdatedInput, checked_values
from d2k_env.tasks.matrix_norm import MatrixNormError
from d2k_env.tasks.properties import (BytesNearRoofline, DesignProperty, MaxLaunches, NoLargeIntermediate,
                                      UsesDot)
from d2k_env.tasks.reductions import SumTolerance
from d2k_env.tasks.rounding_noise import RoundingNoise, noise_sigma
from d2k_env.tasks.spec import HELDOUT_KINDS, WRONG_SOLUTION_KINDS, Heldout, Output, SpecError, TaskSpec, WrongSolution

__all__ = ["AccumulationBound", "CANCELLATION_FLOOR", "FLOAT_TOLERANCES", "HELDOUT_KINDS", "WRONG_SOLUTION_KINDS", "Alternative", "Check", "CheckResult",
           "Exact", "Heldout", "MatrixNormError", "OneStep", "Output", "OutputCheck", "PerOutput", "Quantised",
           "RelativeError", "Roofline", "RoundingNoise", "SampleAgreement", "SpecError", "SumTolerance", "TaskSpec",
           "Tolerance", "UpdatedInput", "Workload", "WrongSolution", "checked_values", "compare_output",
           "default_check", "dtype_step", "noise_sigma", "BytesNearRoofline", "DesignProperty", "MaxLaunches",
           "NoLargeIntermediate", "UsesDot"]
