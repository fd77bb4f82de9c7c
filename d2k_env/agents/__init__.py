"""Policies that drive KernelEnv episodes.

:class:`ChatPolicy` (an OpenAI-compatible chat server) needs the ``agents`` extra
(``pip install "d2k-env[agents]"``); it is imported on first use.
"""

from d2k_env.agents.base import Policy, PolicyError, TokenUsage
from d2k_env.agents.scripted import ScriptedPolicy, reference_design_policy, reference_policy

__all__ = ["ChatPolicy", "Policy", "PolicyError", "ScriptedPolicy", "TokenUsage", "reference_design_policy",
           "reference_policy"]


def __getattr__(name: str):
    if name == "ChatPolicy":
        from d2k_env.agents.openai_chat import ChatPolicy

        return ChatPolicy
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
