#!/bin/bash
# AVX2 emulated: the preset's float32 step eager vs torch.compile, alternated rounds (ABBA), fresh processes, alone on the CPU
export ATEN_CPU_CAPABILITY=avx2 ONEDNN_MAX_CPU_ISA=AVX2 CSAN_DATA=../shared/data
cd /work/main
O=${1:-/work/runs40/cmp}
mkdir -p $O
for r in 1 2 3; do
  if [ $((r % 2)) = 1 ]; then order="false true"; else order="true false"; fi
  for c in $order; do
    echo -n "round $r compile $c: "
    .venv/bin/python benchmarks/profile_train_step.py --label compile-$c-$r --out $O --set train.compile=$c --warmup 20 --steps 100 --profile-steps 1 --rows 40 2>&1 | grep -E "median"
  done
done
