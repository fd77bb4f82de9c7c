"""The d2k-env kernel tasks as a verifiers environment package, found by its id as verifiers' CLIs
look environments up (``vf-eval d2k_kernels``, ``vf-validate d2k_kernels``): the taskset and env
classes, exported through ``__all__``, and ``load_environment`` for use from Python. Everything is
:mod:`d2k_env.integrations.verifiers`'s; this package only gives it the name verifiers imports."""

from d2k_env.integrations.verifiers import KernelTaskset, KernelVerifiersEnv, load_environment

__all__ = ["KernelTaskset", "KernelVerifiersEnv", "load_environment"]
