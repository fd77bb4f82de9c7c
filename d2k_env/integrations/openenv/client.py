"""The WebSocket client of a served kernel task (see :mod:`.server`): one session per client.

    async with KernelEnvClient(base_url="http://localhost:8000") as env:
        result = await env.reset(task="fused_add_rmsnorm", guidance="L1", seed=0)
        result = await env.step(KernelAction(tool="read_file", args={"path": "baseline.py"}))

``client.sync()`` gives the same calls without ``await``.
"""

from __future__ import annotations

import os
from typing import Any

from openenv.core.client_types import StepResult
from openenv.core.env_client import EnvClient
from websockets.asyncio.client import connect as ws_connect

from d2k_env.integrations.openenv.models import KernelAction, KernelObservation, KernelState


class KernelEnvClient(EnvClient[KernelAction, KernelObservation, KernelState]):
    """Typed client: ``reset(task=..., guidance=..., seed=...)``, ``step(KernelAction)``, ``state()``.
    ``token`` (default: ``$D2K_OPENENV_TOKEN``) is the server's bearer token, when it has one."""

    def __init__(self, base_url: str, token: str | None = None, **kwargs: Any):
        super().__init__(base_url, **kwargs)
        self._token = token or os.environ.get("D2K_OPENENV_TOKEN")

    async def connect(self) -> "KernelEnvClient":
        if self._ws is not None or not self._token:
            return await super().connect()
        try:
            self._ws = await ws_connect(self._ws_url, open_timeout=self._connect_timeout, max_size=self._max_message_size,
                                        additional_headers={"Authorization": f"Bearer {self._token}"})
        except Exception as exc:  # noqa: BLE001 - as the base client reports a failed connection
            raise ConnectionError(f"Failed to connect to {self._ws_url}: {exc}") from exc
        return self

    def _step_payload(self, action: KernelAction) -> dict[str, Any]:
        return action.model_dump(exclude={"metadata"})

    def _parse_result(self, payload: dict[str, Any]) -> StepResult[KernelObservation]:
        observation = KernelObservation(**payload.get("observation", {}), reward=payload.get("reward"),
                                        done=payload.get("done", False))
        return StepResult(observation=observation, reward=payload.get("reward"), done=payload.get("done", False))

    def _parse_state(self, payload: dict[str, Any]) -> KernelState:
        return KernelState(**payload)
