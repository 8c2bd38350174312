#!/bin/bash
# Transformer-Tiny's shape and recipe (main-tiny-hour-native-bf16-2026-11-25) at 1,024 tokens a batch, native bf16 Zen 4, alone on the CPU
cd /work/main
{ date -u; time CSAN_DATA=../shared/data .venv/bin/csan train --config multi30k-small --set model.d_model=128 \
    --set model.ffn_dim=256 --set model.heads=4 --set model.encoder_layers=4 \
    --set model.decoder_layers=4 --set model.pre_norm=false --set train.lr=0.0025 \
    --set train.validate_every=1024 --set train.average_last=10 --set train.max_tokens=1024 --out /work/runs35/tiny-b1024-lr2.5e-3; date -u; } > /work/runs35/tiny-b1024-lr2.5e-3.out 2>&1
