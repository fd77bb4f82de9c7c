"""The WebSocket client of a served kernel task (see :mod:`.server`): one session per client.

    async with KernelEnvClient(base_url="http://localhost:8000") as env:
        result = await env.reset(task="fused_add_rmsnorm", guidance="L1", seed=0)
        result = await env.step(KernelAction(tool="read_file", args={"path": "baseline.py"}))

``client.sync()`` gives the same calls without ``await``.
"""

from __future__ import annotations

from typing import Any

from openenv.core.client_types import StepResult
from openenv.core.env_client import EnvClient

from d2k_env.integrations.openenv.models import KernelAction, KernelObservation, KernelState


class KernelEnvClient(EnvClient[KernelAction, KernelObservation, KernelState]):
    """Typed client: ``reset(task=..., guidance=..., seed=...)``, ``step(KernelAction)``, ``state()``."""

    def _step_payload(self, action: KernelAction) -> dict[str, Any]:
        return action.model_dump(exclude={"metadata"})

    def _parse_result(self, payload: dict[str, Any]) -> StepResult[KernelObservation]:
        observation = KernelObservation(**payload.get("observation", {}), reward=payload.get("reward"),
                                        done=payload.get("done", False))
        return StepResult(observation=observation, reward=payload.get("reward"), done=payload.get("done", False))

    def _parse_state(self, payload: dict[str, Any]) -> KernelState:
        return KernelState(**payload)
