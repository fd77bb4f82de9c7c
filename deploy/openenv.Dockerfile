# The kernel tasks as an OpenEnv server (d2k_env.integrations.openenv), from the repository root:
#   docker build -f deploy/openenv.Dockerfile -t d2k-openenv .
#   docker run --gpus all -p 8000:8000 d2k-openenv            # GPU: speedup rewards
#   docker run -p 8000:8000 d2k-openenv --backend interpreter  # CPU: Triton's interpreter
# The torch wheel brings its CUDA libraries; the host's driver comes in through --gpus.
FROM python:3.11-slim

# Triton compiles a small C launcher for each kernel at run time.
RUN apt-get update && apt-get install -y --no-install-recommends gcc libc6-dev \
    && rm -rf /var/lib/apt/lists/*

WORKDIR /opt/d2k-env
COPY pyproject.toml README.md ./
COPY d2k_env d2k_env
COPY tasks tasks
COPY baselines baselines
COPY references references
COPY guidance guidance
RUN pip install --no-cache-dir ".[openenv]"

# The server stays root: run as root, the evaluation sandbox gives each worker an unprivileged user
# of its own (one of its layers, see the README's security section).
EXPOSE 8000
ENTRYPOINT ["python", "-m", "d2k_env.integrations.openenv", "--host", "0.0.0.0", "--port", "8000"]
