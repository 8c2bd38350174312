#!/bin/bash
# AVX2 emulated on the Zen 4: float32 eager step at 1,024 tokens: vanilla, cnn@0-1 (2 convs a layer), cnn@0-1 with 1 conv a layer, cnn@0 (2 convs); two alternated rounds, each a fresh process
export ATEN_CPU_CAPABILITY=avx2 ONEDNN_MAX_CPU_ISA=AVX2 CSAN_DATA=../shared/data
cd /work/main
O=/work/runs38/probe
for r in 1 2; do
  .venv/bin/python benchmarks/profile_train_step.py --label b1024-$r --out $O --set train.max_tokens=1024 --warmup 12 --steps 60 --profile-steps 1 2>&1 | grep -E "median|mode"
  .venv/bin/python benchmarks/profile_train_step.py --label cnn01-$r --out $O --set train.max_tokens=1024 --set model.encoder_attention=cnn@0-1 --warmup 12 --steps 60 --profile-steps 1 2>&1 | grep -E "median|mode"
  .venv/bin/python benchmarks/profile_train_step.py --label cnn01-c1-$r --out $O --set train.max_tokens=1024 --set model.encoder_attention=cnn@0-1 --set model.attention_options.cnn.conv_layers=1 --warmup 12 --steps 60 --profile-steps 1 2>&1 | grep -E "median|mode"
  .venv/bin/python benchmarks/profile_train_step.py --label cnn0-$r --out $O --set train.max_tokens=1024 --set model.encoder_attention=cnn@0 --warmup 12 --steps 60 --profile-steps 1 2>&1 | grep -E "median|mode"
done
