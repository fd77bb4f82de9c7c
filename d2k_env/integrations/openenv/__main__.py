"""``python -m d2k_env.integrations.openenv``: serve the kernel tasks (``--help`` for the options)."""

from d2k_env.integrations.openenv.server import main

main()
