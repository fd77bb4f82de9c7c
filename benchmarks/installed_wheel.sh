#!/usr/bin/env bash
# The built wheel as a GPU user installs and uses it, with no checkout in reach: installed into the
# machine's own Python (with the dependency wheels of ./.whl that the machine lacks), then, from an
# empty directory, `d2k --version`, `d2k demo`, `d2k eval --mode submit` of every shipped reference
# (its memory-checked run included, where compute-sanitizer is installed) and a `gym.make` episode.
# Run from the project root:  benchmarks/installed_wheel.sh WHEEL OUT_DIR
# (WHEEL: `python3 -m pip wheel --no-deps -w dist .`; ./.whl from ../shared/gpu/prepare-wheels.sh.)
# DEADLINE_S=N stops starting submits N seconds after the script began (a device call's limit);
# TASKS="a b ..." submits those references only (default: every one), to finish a run a deadline cut;
# EPISODE=0 skips the demo and the episode.
set -uo pipefail
wheel=$(realpath "${1:?usage: benchmarks/installed_wheel.sh WHEEL OUT_DIR}")
out=$(realpath -m "${2:?usage: benchmarks/installed_wheel.sh WHEEL OUT_DIR}")
mkdir -p "$out"
export PYTHONUNBUFFERED=1
unset PYTHONPATH
{ date -u; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
  python3 -c "import torch, triton, sys; print('python', sys.version.split()[0], sys.prefix); print('torch', torch.__version__, 'triton', triton.__version__)"
  command -v compute-sanitizer || echo "compute-sanitizer: not found"; } | tee "$out/device.txt"
python3 -m pip install -q --no-index --no-deps --break-system-packages .whl/*.whl "$wheel" 2>&1 | tee "$out/install.log"
site=$(python3 -c "import sysconfig; print(sysconfig.get_paths()['purelib'])")
echo "site-packages: $site ($(ls "$site" | wc -l) entries)" | tee -a "$out/device.txt"
# The solutions: the shipped references, copied out of the repository before leaving it.
work=$(mktemp -d); cp references/*.py "$work/"; cd "$work"
python3 -c "import d2k_env, sys; print('d2k_env from', d2k_env.__file__)" | tee -a "$out/device.txt"
{ time d2k --version; } > "$out/version.log" 2>&1; cat "$out/version.log"
if [[ ${EPISODE:-1} == 1 ]]; then  # EPISODE=0: submits only (demo and episode shown by an earlier run)
{ time timeout 300 d2k demo --backend "${D2K_BACKEND:-cuda}"; } > "$out/demo.log" 2>&1; tail -5 "$out/demo.log"
timeout 300 python3 - > "$out/episode.log" 2>&1 <<'PY'
import os, time, gymnasium as gym, d2k_env
BACKEND = os.environ.get("D2K_BACKEND", "cuda")
from pathlib import Path
t0 = time.perf_counter()
env = gym.make("D2K/fused_add_rmsnorm-v0", backend=BACKEND)
obs, info = env.reset(seed=0)
source = Path("fused_add_rmsnorm.py").read_text()
# run_tests three times: the first starts the workers, the others are the warm latency issue 25 bounds.
for action in ({"tool": "write_file", "args": {"path": "solution.py", "content": source}},
               *[{"tool": "run_tests", "args": {}}] * 3, {"tool": "submit", "args": {}}):
    t = time.perf_counter()
    obs, reward, terminated, truncated, info = env.step(action)
    print(action["tool"], f"{time.perf_counter() - t:.2f} s", "reward", reward, "terminated", terminated,
          "truncated", truncated, flush=True)
env.close()
print(f"episode {time.perf_counter() - t0:.1f} s")
PY
echo "== episode: exit $?"; tail -5 "$out/episode.log"
fi
# Every reference's submit, while DEADLINE_S (seconds since the script began; unset: no limit) allows.
for task in ${TASKS:-$(ls "$work"/*.py | xargs -n1 basename | sed 's/\.py$//')}; do
  left=$(( ${DEADLINE_S:-100000} - SECONDS )); (( left < 15 )) && { echo "== deadline: stopped before $task"; break; }
  { time timeout $(( left < 300 ? left : 300 )) d2k eval --backend "${D2K_BACKEND:-cuda}" --mode submit "$task" "$work/$task.py" --json "$out/submit-$task.json"; } \
      > "$out/submit-$task.log" 2>&1
  echo "== $task: exit $?"; tail -4 "$out/submit-$task.log"
done
