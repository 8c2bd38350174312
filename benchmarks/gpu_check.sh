#!/usr/bin/env bash
# One call on a lent CUDA machine: what csan's CUDA paths do there, in one prepared script.
#
#   OUT=results-folder DATA=folder-with-multi30k bash benchmarks/gpu_check.sh
#
# 1. the machine (GPU, driver, torch; the host CPU and the mode as `csan info` gives them);
# 2. the CUDA tests (pytest -m cuda: the flex kernel against the definition, outputs and gradients);
# 3. csan bench attention --device cuda (every backend, float32, 1 x T and the 64 x 32 sentence case);
# 4. the main job (multi30k-small) trained on the GPU for TRAIN_MINUTES (default 2) with bf16 autocast,
#    then beam search and sacreBLEU on test2016;
# 5. (only when STEPS names "cpu") benchmarks/plain_attention.py on two of the host's cores, where the
#    host CPU has avx512_bf16: the kernels on a native-bf16 CPU (not this project's 2-core machine kind:
#    say so beside the figures).
# 6. (only when STEPS names "hostbf16", and only where the host CPU has avx512_bf16) the main preset's
#    CPU path on native bf16 (bf16 autocast + torch.compile; output_vocab auto: the full softmax): the tests
#    that train it and its output vocabulary on the CPU, then the in-process timing of the full
#    against the target-side softmax (vocab_inproc.py) on two host cores. Not this project's machine
#    kind either: say so beside the figures.
# Steps run independently, each under its own time limit, so one failure does not hide the others;
# STEPS (default "tests bench train") picks which of them run.
# Everything printed goes to $OUT/gpu-check.log; the results files to $OUT.
set -u
OUT=${OUT:?set OUT}
DATA=${DATA:-../shared/data}
TRAIN_MINUTES=${TRAIN_MINUTES:-2}
STEPS=${STEPS:-tests bench train}
PY=${PY:-python3}
export PYTHONPATH="$PWD/src${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
exec > >(tee "$OUT/gpu-check.log") 2>&1

step() { echo; echo "=== $1 ($(date -u +%T))"; }

step "machine"
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv
$PY -m csan info --set train.device=cuda | head -2  # the host CPU as csan sees it, and the mode on CUDA
$PY -c "import torch, sys; print('python', sys.version.split()[0], 'torch', torch.__version__, 'cuda', torch.version.cuda, torch.cuda.get_device_name() if torch.cuda.is_available() else 'no GPU')"

if [[ " $STEPS " == *" tests "* ]]; then
  step "CUDA tests"
  timeout 150 $PY -m pytest -m cuda -q -p no:cacheprovider -o addopts="" tests/kernels/test_flex.py \
    tests/attention/test_local_attention.py
  echo "pytest exit: $?"
fi

if [[ " $STEPS " == *" bench "* ]]; then
  step "csan bench attention --device cuda"
  timeout 150 $PY -m csan bench attention --device cuda --lengths 64 256 1024 4096 16384 --out "$OUT"
  echo "bench exit: $?"
fi

if [[ " $STEPS " == *" train "* ]]; then
  step "main job on the GPU, ${TRAIN_MINUTES} minutes"
  run=/tmp/csan-gpu-main
  timeout 240 $PY -m csan train --config multi30k-small --data-dir "$DATA/multi30k" --no-progress \
    --set train.device=cuda --set train.max_minutes="$TRAIN_MINUTES" --out "$run"
  echo "train exit: $?"
  for f in results.json metrics.jsonl test2016.json; do [ -f "$run/$f" ] && cp "$run/$f" "$OUT/train-$f"; done
fi

if [[ " $STEPS " == *" cpu "* ]]; then
  step "plain attention harness on two host cores"
  if grep -q -w avx512_bf16 /proc/cpuinfo; then
    OMP_NUM_THREADS=2 timeout 150 taskset -c 0,1 $PY benchmarks/plain_attention.py --out "$OUT"
    echo "plain exit: $?"
  else
    echo "skipped: the host CPU has no avx512_bf16"
  fi
fi

if [[ " $STEPS " == *" hostbf16 "* ]]; then
  step "the main preset's CPU path on the host's native bf16"
  if grep -q -w avx512_bf16 /proc/cpuinfo; then
    data=$(cd "$DATA" && pwd)  # absolute: pytest and the trainers resolve it from their own cwd
    pin() { taskset -c "$1" true 2>/dev/null && echo taskset -c "$1"; }  # nothing where taskset fails
    CSAN_DATA=$data OMP_NUM_THREADS=4 timeout 300 $(pin 0-3) $PY -m pytest -q -p no:cacheprovider \
      -o addopts="" tests/training/test_output_vocab.py \
      tests/training/test_training.py::test_main_preset_trains_in_the_mode_auto_picks
    echo "pytest exit: $?"
    CSAN_DATA=$data OMP_NUM_THREADS=2 timeout 300 $(pin 0,1) $PY \
      benchmarks/results/output-vocab-avx2-zen3-2026-11-29/vocab_inproc.py train.device=cpu train.threads=2
    echo "vocab_inproc exit: $?"
  else
    echo "skipped: the host CPU has no avx512_bf16"
  fi
fi

step "done"
