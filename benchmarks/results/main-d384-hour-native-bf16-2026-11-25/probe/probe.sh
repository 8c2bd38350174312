#!/usr/bin/env bash
# throughput of model shapes for the hour (issue 16); the grid must be paused
cd /work/hour-pn
run() { name=$1; shift
  rm -rf /work/runs-ab/probe/$name
  CSAN_DATA=../shared/data timeout 400 .venv/bin/csan train --config multi30k-small --set train.max_steps=200 \
    --set train.valid_bleu=false --set train.validate_every=100000 "$@" --out /work/runs-ab/probe/$name > /work/runs-ab/probe/$name.log 2>&1
  echo "$name $(grep -o 'parameters' -m1 /work/runs-ab/probe/$name.log >/dev/null; grep -o 'transformer, [0-9,]* parameters' /work/runs-ab/probe/$name.log) $(python3 -c "
import json,sys
rows=[json.loads(l) for l in open('/work/runs-ab/probe/$name/metrics.jsonl') if '\"train\"' in l]
print([r['tokens_per_s'] for r in rows], 'loss@200', rows[-1]['nll'] if rows else None)")"
}
run base
run d512f2048h8 --set model.d_model=512 --set model.ffn_dim=2048 --set model.heads=8
run d512f1024h8 --set model.d_model=512 --set model.ffn_dim=1024 --set model.heads=8
run d384f1536h6 --set model.d_model=384 --set model.ffn_dim=1536 --set model.heads=6
run e6d3 --set model.encoder_layers=6
run f2048 --set model.ffn_dim=2048
