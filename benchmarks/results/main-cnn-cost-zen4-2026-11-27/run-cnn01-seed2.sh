#!/bin/bash
# the 40.21 hour again with seed 2: the preset at 1,024 tokens with convolutions (2 sublayers) in encoder layers 0-1; native bf16 Zen 4, alone on the CPU
cd /work/main
{ date -u; git -C /work/main log --oneline -1; time CSAN_DATA=../shared/data .venv/bin/csan train --config multi30k-small --set train.max_tokens=1024 --set model.encoder_attention=cnn@0-1 --set train.seed=2 --out /work/runs38/cnn01-seed2; date -u; } > /work/runs38/cnn01-seed2.out 2>&1
CSAN_DATA=../shared/data .venv/bin/csan evaluate --model /work/runs38/cnn01-seed2/model --lenpen 1.4 --src ../shared/data/multi30k/valid.en --ref ../shared/data/multi30k/valid.de > /work/runs38/cnn01-seed2.valid 2>&1
