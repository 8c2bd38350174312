#!/bin/bash
# side by side on AVX2 emulation, one thread each, started together; csan runs from a frozen clone
export CSAN_DATA=/work/shared/data ATEN_CPU_CAPABILITY=avx2 ONEDNN_MAX_CPU_ISA=AVX2 OMP_NUM_THREADS=1
cd /work/runs-ab/s7 && PYTHONPATH=/work/runs-ab/s7/code/src /work/main/.venv/bin/python -m csan train --config multi30k-small --out /work/runs-ab/s7/csan-avx2-1t --set train.threads=1 --no-progress > /work/runs-ab/s7/csan.log 2>&1 &
cd /tmp && TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD=1 FSVENV=/tmp/fsvenv bash /work/shared/peers/fairseq/run.sh /work/runs-ab/s7/fairseq-avx2-1t 1.0 > /work/runs-ab/s7/fairseq.log 2>&1 &
wait
