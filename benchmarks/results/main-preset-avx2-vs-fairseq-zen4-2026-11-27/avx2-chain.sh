#!/bin/bash
# AVX2 emulated on the native-bf16 Zen 4: csan's main job at 1,024 tokens, then fairseq's hour; each alone on the CPU (about 2 h 5 min in all).
# Start it in the first minutes of a session: a session's stop kills its processes.
set -u
OUTDIR=${1:-/work/runs39/avx2}
mkdir -p $OUTDIR
export ATEN_CPU_CAPABILITY=avx2 ONEDNN_MAX_CPU_ISA=AVX2
cd /work/main
EXTRA=${2:-}  # e.g. "--set model.encoder_attention=cnn@0-1 --set model.attention_options.cnn.conv_layers=1"
{ date -u; git log --oneline -1; time CSAN_DATA=../shared/data .venv/bin/csan train --config multi30k-small --set train.max_tokens=1024 $EXTRA --out $OUTDIR/csan-b1024; date -u; } > $OUTDIR/csan-b1024.out 2>&1
cd /tmp
{ date -u; time TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD=1 FSVENV=/work/fsvenv bash /work/shared/peers/fairseq/run.sh $OUTDIR/fairseq 1.0; date -u; } > $OUTDIR/fairseq.out 2>&1
