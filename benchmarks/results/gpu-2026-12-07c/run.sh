#!/usr/bin/env bash
# Session 2026-12-07c: the built wheel on the GPU (no checkout in reach), the boundary's latency,
# escapes on cuda, then every family reference's submit until the deadline.
set -uo pipefail
T0=$(date +%s); LIMIT=${LIMIT:-215}
left() { echo $(( LIMIT - ($(date +%s) - T0) )); }
O=$OUT/r; mkdir -p $O
finish() { cd $OUT && tar czf r.tgz r && rm -rf r; }
trap finish EXIT
export PYTHONUNBUFFERED=1; unset PYTHONPATH
repo=$(pwd)
python3 -m pip install -q --no-index --no-deps --break-system-packages .whl/*.whl .whl/dist/*.whl > $O/install.log 2>&1 || { echo install failed; tail $O/install.log; }
site=$(python3 -c "import sysconfig; print(sysconfig.get_paths()['purelib'])")
{ git log -1 --format=%h; date -u; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
  python3 -c "import torch, triton, sys; print('python', sys.version.split()[0], sys.prefix); print('torch', torch.__version__, 'triton', triton.__version__)"
  echo "site-packages: $site ($(ls $site | wc -l) entries)"; command -v compute-sanitizer || echo "compute-sanitizer: not found"; } | tee $O/device.txt
work=$(mktemp -d); cp references/*.py $work/; cd $work
python3 -c "import d2k_env; print('d2k_env from', d2k_env.__file__)" | tee -a $O/device.txt
d2k --version | tee -a $O/device.txt
ev() {  # task tag timeout
  local s=$(date +%s%N)
  timeout $3 d2k eval $1 $work/$1.py --backend cuda --mode submit --json $O/eval_$2.json > $O/eval_$2.log 2>&1
  local rc=$? e=$(date +%s%N); echo "$2: rc=$rc $(( (e - s) / 1000000 )) ms"; grep -E "^(PASSED|FAILED)|geomean|memory check" $O/eval_$2.log | head -3
}
for t in fused_add_rmsnorm merge_attn_states per_token_group_quant_fp8; do ev $t ${t}_1 60; ev $t ${t}_2 45; done
timeout 60 python3 - > $O/episode.log 2>&1 <<'PY'
import time, gymnasium as gym, d2k_env
from pathlib import Path
t0 = time.perf_counter()
env = gym.make("D2K/fused_add_rmsnorm-v0", backend="cuda")
env.reset(seed=0)
src = Path("fused_add_rmsnorm.py").read_text()
for action in ({"tool": "write_file", "args": {"path": "solution.py", "content": src}},
               {"tool": "run_tests", "args": {}}, {"tool": "run_tests", "args": {}}, {"tool": "submit", "args": {}}):
    t = time.perf_counter(); obs, reward, term, trunc, info = env.step(action)
    print(action["tool"], f"{time.perf_counter() - t:.2f} s", "reward", reward, "terminated", term)
env.close()
print(f"episode {time.perf_counter() - t0:.1f} s")
PY
echo "episode: rc=$?"; cat $O/episode.log | tail -6
cd $repo
D2K_SECURITY_WORKERS=1 timeout 50 python3 -m pytest -q -m gpu tests/test_escapes.py -k "frames or forged" -rA -p no:cacheprovider > $O/escapes_gpu.log 2>&1; tail -2 $O/escapes_gpu.log
cd $work
for f in $(ls *.py | sed 's/\.py$//'); do
  case $f in fused_add_rmsnorm|merge_attn_states|per_token_group_quant_fp8) continue;; esac
  l=$(left); (( l < 8 )) && { echo "deadline: stopped before $f"; break; }
  ev $f $f $(( l < 40 ? l : 40 ))
done
