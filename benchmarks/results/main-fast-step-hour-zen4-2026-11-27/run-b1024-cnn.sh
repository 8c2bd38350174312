#!/bin/bash
# the preset at 1,024 tokens with QANet-style convolutions in encoder layers 0-1 (converged: +0.56 over vanilla, 3 seeds); native bf16 Zen 4, alone on the CPU
cd /work/main
{ date -u; git -C /work/main log --oneline -1; time CSAN_DATA=../shared/data .venv/bin/csan train --config multi30k-small --set train.max_tokens=1024 --set model.encoder_attention=cnn@0-1 --out /work/runs37/b1024-cnn; date -u; } > /work/runs37/b1024-cnn.out 2>&1
CSAN_DATA=../shared/data .venv/bin/csan evaluate --model /work/runs37/b1024-cnn/model --lenpen 1.4 --src ../shared/data/multi30k/valid.en --ref ../shared/data/multi30k/valid.de > /work/runs37/b1024-cnn.valid 2>&1
