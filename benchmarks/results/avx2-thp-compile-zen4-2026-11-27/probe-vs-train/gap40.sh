#!/bin/bash
# AVX2 emulated: step time in the probe vs in csan train, with and without THP; alone on the CPU
export ATEN_CPU_CAPABILITY=avx2 ONEDNN_MAX_CPU_ISA=AVX2 CSAN_DATA=../shared/data
cd /work/main
O=${1:-/work/runs40/gap}
mkdir -p $O
for r in 1 2; do
  for thp in 0 1; do
    THP_MEM_ALLOC_ENABLE=$thp .venv/bin/python benchmarks/profile_train_step.py --label probe-thp$thp-$r --out $O --warmup 12 --steps 150 --profile-steps 1 2>&1 | grep -E "median"
    rm -rf $O/train-thp$thp-$r
    THP_MEM_ALLOC_ENABLE=$thp .venv/bin/csan train --config multi30k-small --set train.max_steps=400 --set train.evaluate_test=false --set train.log_every=50 --out $O/train-thp$thp-$r > $O/train-thp$thp-$r.out 2>&1
    python3 - $O/train-thp$thp-$r/metrics.jsonl <<'PY'
import json,sys,statistics
L=[json.loads(l) for l in open(sys.argv[1]) if '"train"' in l]
d=[(b['train_seconds']-a['train_seconds'])/(b['step']-a['step']) for a,b in zip(L,L[1:])]
print(sys.argv[1].split('/')[-2], 'tok/s', [r['tokens_per_s'] for r in L], 'ms/step', [round(1e3*x) for x in d])
PY
  done
done
