"""The OpenEnv server of the d2k-env kernel tasks (see server/app.py)."""
