"""OpenEnv: the kernel tasks served by ``openenv-core``'s app, one env per WebSocket session.

- :mod:`.models`: the typed :class:`KernelAction`, :class:`KernelObservation`, :class:`KernelState`
  and :class:`KernelMetadata` (``GET /metadata``: the backend, whether it times kernels);
- :mod:`.server`: :class:`KernelEnvironment` (``reset``/``step``/``state``, concurrent sessions) and
  :func:`make_app`, also ``python -m d2k_env.integrations.openenv`` to serve it;
- :mod:`.client`: :class:`KernelEnvClient`, the WebSocket client.

Needs the ``openenv`` extra. ``deploy/openenv.Dockerfile`` builds an image that serves it.
"""

from d2k_env.integrations.openenv.client import KernelEnvClient
from d2k_env.integrations.openenv.models import KernelAction, KernelMetadata, KernelObservation, KernelState
from d2k_env.integrations.openenv.server import KernelEnvironment, make_app

__all__ = ["KernelAction", "KernelEnvClient", "KernelEnvironment", "KernelMetadata", "KernelObservation", "KernelState",
           "make_app"]
