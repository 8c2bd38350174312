#!/bin/bash
# Transformer-Tiny at 1,024 tokens, lr 0.0025, cooldown over the last 40% of the hour (not 20%); native bf16 Zen 4, alone on the CPU
cd /work/main
{ date -u; time CSAN_DATA=../shared/data .venv/bin/csan train --config multi30k-small --set model.d_model=128 \
    --set model.ffn_dim=256 --set model.heads=4 --set model.encoder_layers=4 \
    --set model.decoder_layers=4 --set model.pre_norm=false --set train.lr=0.0025 \
    --set train.validate_every=1024 --set train.average_last=10 --set train.max_tokens=1024 --set train.cooldown_fraction=0.4 --out /work/runs35/tiny-b1024-cd0.4; date -u; } > /work/runs35/tiny-b1024-cd0.4.out 2>&1
