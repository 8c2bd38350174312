#!/bin/bash
# Real AVX2 (Zen 3): csan's main job with two convolution sublayers, then fairseq's hour; each alone on the CPU (~2 h 5 min).
set -u
OUTDIR=${1:-/work/runs48/hour}
cd /work/main
{ date -u; git log --oneline -1; time CSAN_DATA=../shared/data .venv/bin/csan train --config multi30k-small --set model.attention_options.cnn.conv_layers=2 --out $OUTDIR/csan; date -u; } > $OUTDIR/csan.out 2>&1
mkdir -p $OUTDIR/fairseq && cp -r /work/runs46/c1c2/fairseq-prep/bin $OUTDIR/fairseq/bin
cd /tmp
{ date -u; time TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD=1 FSVENV=/work/fsvenv bash /work/shared/peers/fairseq/run.sh $OUTDIR/fairseq 1.0; date -u; } > $OUTDIR/fairseq.out 2>&1
