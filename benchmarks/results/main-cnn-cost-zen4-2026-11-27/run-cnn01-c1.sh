#!/bin/bash
# the preset at 1,024 tokens with one convolution sublayer (not two) in encoder layers 0-1: half the convolutions' cost on AVX2 (probe: 0.98x of vanilla 1,024 vs 0.90x); native bf16 Zen 4, alone on the CPU
cd /work/main
{ date -u; git -C /work/main log --oneline -1; time CSAN_DATA=../shared/data .venv/bin/csan train --config multi30k-small --set train.max_tokens=1024 --set model.encoder_attention=cnn@0-1 --set model.attention_options.cnn.conv_layers=1 --out /work/runs38/cnn01-c1; date -u; } > /work/runs38/cnn01-c1.out 2>&1
CSAN_DATA=../shared/data .venv/bin/csan evaluate --model /work/runs38/cnn01-c1/model --lenpen 1.4 --src ../shared/data/multi30k/valid.en --ref ../shared/data/multi30k/valid.de > /work/runs38/cnn01-c1.valid 2>&1
