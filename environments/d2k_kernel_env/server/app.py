"""The d2k-env kernel tasks as an OpenEnv environment directory: ``app`` is the FastAPI app that
``openenv serve`` and ``uvicorn server.app:app`` run, ``main`` the ``server`` script (``uv run
server --port 8000``, ``--help`` for the options). Everything is
:mod:`d2k_env.integrations.openenv`'s; the task of a reset that names none is ``$D2K_TASK``
(default: the first registered task)."""

from d2k_env.integrations.openenv import server

app = server.make_app()


def main(argv: list[str] | None = None) -> None:
    """Serve the kernel tasks (``python -m d2k_env.integrations.openenv``'s options)."""
    server.main(argv)


if __name__ == "__main__":
    main()
