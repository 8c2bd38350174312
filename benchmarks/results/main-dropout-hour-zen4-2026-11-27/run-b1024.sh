#!/bin/bash
# the preset at 1,024 tokens a batch (as main-batch-hour-zen4-2026-11-26/b1024), after the compiled-dropout change (63af566); native bf16 Zen 4, alone on the CPU
cd /work/main
{ date -u; time CSAN_DATA=../shared/data .venv/bin/csan train --config multi30k-small --set train.max_tokens=1024 --out /work/runs36/b1024; date -u; } > /work/runs36/b1024.out 2>&1
