#!/bin/bash
# AVX2 emulated on the Intel Xeon: float32 eager step at the preset's 1,024 tokens: the preset (cnn@0-1, 1 full conv a layer),
# 2 full convs a layer, 2 separable convs a layer; two alternated rounds, each a fresh process
export ATEN_CPU_CAPABILITY=avx2 ONEDNN_MAX_CPU_ISA=AVX2 CSAN_DATA=../shared/data
cd /work/main
O=${1:-/work/runs44/probe}
for r in 1 2; do
  .venv/bin/python benchmarks/profile_train_step.py --label c1-$r --out $O --warmup 12 --steps 60 --profile-steps 1 2>&1 | grep -E "median|mode"
  .venv/bin/python benchmarks/profile_train_step.py --label c2-$r --out $O --set model.attention_options.cnn.conv_layers=2 --warmup 12 --steps 60 --profile-steps 1 2>&1 | grep -E "median|mode"
  .venv/bin/python benchmarks/profile_train_step.py --label c2sep-$r --out $O --set model.attention_options.cnn.conv_layers=2 --set model.attention_options.cnn.separable=true --warmup 12 --steps 60 --profile-steps 1 2>&1 | grep -E "median|mode"
done
