"""Policies that drive KernelEnv episodes."""

from d2k_env.agents.scripted import ScriptedPolicy, reference_policy

__all__ = ["ScriptedPolicy", "reference_policy"]
