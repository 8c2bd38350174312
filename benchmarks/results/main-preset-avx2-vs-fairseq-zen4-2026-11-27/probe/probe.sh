#!/bin/bash
# AVX2 emulated on the Zen 4: float32 eager step of the preset before (4,096 tokens, vanilla) and of the new preset (1,024 tokens, cnn@0-1 with one sublayer), two alternated rounds, each a fresh process; alone on the CPU
export ATEN_CPU_CAPABILITY=avx2 ONEDNN_MAX_CPU_ISA=AVX2 CSAN_DATA=../shared/data
cd /work/main
O=${1:-/work/runs39/probe}
for r in 1 2; do
  .venv/bin/python benchmarks/profile_train_step.py --label b4096-vanilla-$r --out $O --set train.max_tokens=4096 --set model.encoder_attention=vanilla --warmup 5 --steps 20 --profile-steps 1 2>&1 | grep -E "median|mode"
  .venv/bin/python benchmarks/profile_train_step.py --label b1024-cnn01-c1-$r --out $O --set train.max_tokens=1024 --set model.encoder_attention=cnn@0-1 --set model.attention_options.cnn.conv_layers=1 --warmup 12 --steps 60 --profile-steps 1 2>&1 | grep -E "median|mode"
done
