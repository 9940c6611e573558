#!/usr/bin/env bash
# The GPU checks of issue 24 in one prepared script, at most 8 minutes on one H200: the GPU
# tests, the fixed costs per step and per update (bench_overhead.py, eager, the updates also
# as CUDA graphs, then the engine and networks compiled), the calculus (quick, one round), a
# short fit of configs/classic_gpu.yaml and a 1000-game evaluation of what it left. Every
# figure lands in one folder ($OUT, else runs/gpu_check).
#
#   bash scripts/gpu_check.sh             # on the GPU machine (../shared/device.md)
#   bash scripts/gpu_check.sh cpu         # the same steps on a CPU, small: does it run?
#
# On the GPU machine, missing pure-Python packages come as wheels in .whl (device.md): they
# are installed first. Each step has its own time limit, so one that hangs cannot eat the
# others' time; a step that fails is recorded in summary.txt and the next one runs.
set -uo pipefail
cd "$(dirname "$0")/.."
DEVICE=${1:-cuda}
OUT=${OUT:-runs/gpu_check}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 WANDB_MODE=disabled
if [ -d .whl ]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/site .whl/*.whl && export PYTHONPATH="/tmp/site:$PWD"
fi
if [ "$DEVICE" = cpu ]; then  # small enough for two cores
  WALKERS="8 64"; BATCHES="512 2048"; FIT_TIME=00:00:01:00; FIT_LIMIT=400; GAMES=200
  BENCH_LIMIT=900; COMPILED_WALKERS=64; COMPILED_LIMIT=600; CALCULUS_LIMIT=170
  FIT_ARGS=(--trainer.accelerator cpu --model.sampler.init_args.walkers 256
            --model.traversals_per_player 256 --model.batch_size 1024
            --model.advantage_updates 4 --model.strategy_updates 2 --model.value_updates 4)
  UPDATE_GRAPHS=  # CUDA graphs need CUDA
  TEST_MARK="gpu or not gpu"; TESTS=(tests/training/test_gpu.py tests/cfr/test_escher_static.py)
  CALCULUS=(--smoke)
else
  WALKERS="8 64 1024 8192 65536"; BATCHES="512 2048 8192 32768"; FIT_TIME=00:00:01:30
  FIT_LIMIT=100; BENCH_LIMIT=120; COMPILED_WALKERS="1024 16384"; COMPILED_LIMIT=70
  CALCULUS_LIMIT=100
  UPDATE_GRAPHS=--update-graphs  # the updates also replayed as CUDA graphs (update_graphs)
  GAMES=1000; FIT_ARGS=(); TEST_MARK=gpu; TESTS=(tests); CALCULUS=(--quick --rounds 1)
fi

step() {  # step NAME SECONDS COMMAND...: run it with a limit, log it, note its status
  local name=$1 limit=$2
  shift 2
  local start=$SECONDS
  timeout "$limit" "$@" > "$OUT/$name.out" 2> "$OUT/$name.err"
  local status=$?
  echo "$name: exit $status, $((SECONDS - start)) s" >> "$OUT/summary.txt"
}

: > "$OUT/summary.txt"
python3 -c "import torch; print(torch.__version__, torch.cuda.is_available() and \
torch.cuda.get_device_name())" >> "$OUT/summary.txt" 2>&1
step pytest_gpu 60 python3 -m pytest -m "$TEST_MARK" -q -p no:cacheprovider "${TESTS[@]}"
# shellcheck disable=SC2086
step bench_overhead "$BENCH_LIMIT" python3 scripts/bench/bench_overhead.py --device "$DEVICE" --reference \
  --walkers $WALKERS --batches $BATCHES --repeats 5 --json $UPDATE_GRAPHS
# the engine and the networks compiled (game/fused.py): operator calls and generated kernels
# per step, against the eager rows above (compiling takes part of the limit)
# shellcheck disable=SC2086
step bench_compiled "$COMPILED_LIMIT" python3 scripts/bench/bench_overhead.py --device "$DEVICE" \
  --engine compiled --networks compiled --walkers $COMPILED_WALKERS --batches 512 \
  --kernels fused --repeats 2 --json
step calculus "$CALCULUS_LIMIT" python3 scripts/bench/calculus.py --device "$DEVICE" "${CALCULUS[@]}" --json
step fit "$FIT_LIMIT" python3 -m lostcities_cfr fit --config configs/classic_gpu.yaml \
  --trainer.max_time "$FIT_TIME" --trainer.default_root_dir "$OUT/fit" \
  --trainer.logger pytorch_lightning.loggers.CSVLogger \
  --trainer.logger.save_dir "$OUT/fit" --model.final_eval_games "$GAMES" "${FIT_ARGS[@]}"
step evaluate 30 python3 -m lostcities_cfr evaluate \
  --agent "ckpt:$OUT/fit/checkpoints/final.ckpt" --opponent heuristic:cautious \
  --games "$GAMES" --device "$DEVICE" --json
cat "$OUT/summary.txt"
