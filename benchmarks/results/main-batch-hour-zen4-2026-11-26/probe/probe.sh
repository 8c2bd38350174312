#!/usr/bin/env bash
# throughput of batch sizes for the hour (issue 16), on an idle CPU
cd /work/main
run() { name=$1; shift
  rm -rf /work/probe33/$name
  CSAN_DATA=../shared/data timeout 500 .venv/bin/csan train --config multi30k-small --set train.max_steps=200 \
    --set train.valid_bleu=false --set train.validate_every=100000 "$@" --out /work/probe33/$name > /work/probe33/$name.log 2>&1
  echo "$name $(grep -o 'transformer, [0-9,]* parameters' /work/probe33/$name.log) $(python3 -c "
import json,sys
rows=[json.loads(l) for l in open('/work/probe33/$name/metrics.jsonl') if '\"train\"' in l]
print([r['tokens_per_s'] for r in rows], 'loss@200', rows[-1]['nll'] if rows else None, 'epoch', rows[-1].get('epoch'))")"
}
for spec in "$@"; do eval run $spec; done
