#!/bin/bash
# the preset at 1,024 tokens a batch after the compiled-step changes (ec2d0bc: byte dropout op, no boolean masks); native bf16 Zen 4, alone on the CPU
cd /work/main
{ date -u; git -C /work/main log --oneline -1; time CSAN_DATA=../shared/data .venv/bin/csan train --config multi30k-small --set train.max_tokens=1024 --out /work/runs37/b1024-fast; date -u; } > /work/runs37/b1024-fast.out 2>&1
CSAN_DATA=../shared/data .venv/bin/csan evaluate --model /work/runs37/b1024-fast/model --lenpen 1.4 --src ../shared/data/multi30k/valid.en --ref ../shared/data/multi30k/valid.de > /work/runs37/b1024-fast.valid 2>&1
