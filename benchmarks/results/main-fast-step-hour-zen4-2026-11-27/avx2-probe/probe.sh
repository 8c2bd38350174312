#!/bin/bash
# AVX2 emulated on the Zen 4: the trainer's float32 eager step at the preset's 4,096 tokens, at 1,024, and at 1,024 with cnn@0-1; two alternated rounds, each a fresh process
export ATEN_CPU_CAPABILITY=avx2 ONEDNN_MAX_CPU_ISA=AVX2 CSAN_DATA=../shared/data
cd /work/main
O=/work/runs37/avx2-probe
for r in 1 2; do
  .venv/bin/python benchmarks/profile_train_step.py --label b4096-$r --out $O --warmup 8 --steps 20 --profile-steps 1 2>&1 | grep -E "median|mode"
  .venv/bin/python benchmarks/profile_train_step.py --label b1024-$r --out $O --set train.max_tokens=1024 --warmup 12 --steps 60 --profile-steps 1 2>&1 | grep -E "median|mode"
  .venv/bin/python benchmarks/profile_train_step.py --label b1024-cnn-$r --out $O --set train.max_tokens=1024 --set model.encoder_attention=cnn@0-1 --warmup 12 --steps 60 --profile-steps 1 2>&1 | grep -E "median|mode"
done
