#!/bin/bash
# AVX2 emulated: the preset's float32 step with THP_MEM_ALLOC_ENABLE 0/1, alternated rounds (ABBA), fresh processes, alone on the CPU
export ATEN_CPU_CAPABILITY=avx2 ONEDNN_MAX_CPU_ISA=AVX2 CSAN_DATA=../shared/data
cd /work/main
O=${1:-/work/runs40/thp}
mkdir -p $O
for r in 1 2 3 4; do
  if [ $((r % 2)) = 1 ]; then order="0 1"; else order="1 0"; fi
  for thp in $order; do
    echo -n "round $r thp $thp: "
    THP_MEM_ALLOC_ENABLE=$thp .venv/bin/python benchmarks/profile_train_step.py --label thp$thp-$r --out $O --warmup 12 --steps 100 --profile-steps 1 2>&1 | grep -E "median"
  done
done
