#!/bin/bash
# side by side on a real AVX2 CPU (AMD EPYC Zen 3, no AVX512), one thread each, started together;
# csan runs from a fresh clone at e1161e1 set up by scripts/setup.sh
export CSAN_DATA=/work/shared/data OMP_NUM_THREADS=1
cd /work/hour3 && .venv/bin/csan train --config multi30k-small --out /work/s24/hour/csan-1t --set train.threads=1 --no-progress > /work/s24/hour/csan.log 2>&1 &
cd /tmp && TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD=1 FSVENV=/tmp/fsvenv bash /work/shared/peers/fairseq/run.sh /work/s24/hour/fairseq-1t 1.0 > /work/s24/hour/fairseq.log 2>&1 &
wait
