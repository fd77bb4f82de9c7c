"""Adapters from :class:`d2k_env.env.KernelEnv` to RL frameworks, one module per framework.

Each module imports its framework only where it is used (or at its own import), never from
``import d2k_env``, so the core package stays light; install the matching extra to use one:
``d2k-env[trl]`` (:mod:`d2k_env.integrations.trl`), ``d2k-env[openenv]``
(:mod:`d2k_env.integrations.openenv`), ``d2k-env[verifiers]`` (:mod:`d2k_env.integrations.verifiers`).
The framework-free pieces they share live in :mod:`d2k_env.integrations.common`.
"""
