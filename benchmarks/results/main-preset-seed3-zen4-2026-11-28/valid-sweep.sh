#!/bin/bash
set -u
cd /work/main
D=../shared/data/multi30k
ev() { .venv/bin/csan evaluate --model "$1" --beam "$2" --lenpen "$3" --src $D/valid.en --ref $D/valid.de --json 2>/dev/null | python3 -c "import json,sys; d=json.load(sys.stdin); print(round(d['bleu'],2), round(d['chrf'],2))"; }
for RUN in /work/runs42/preset-seed3 /work/runs42/b512; do
for b in 4 5; do for lp in 1.0 1.4 1.8; do
  echo "$RUN valid beam $b lenpen $lp: $(ev $RUN/model $b $lp)"
done; done; done
for n in 1 6; do echo "preset-seed3 avg-last-$n valid beam 4 lenpen 1.4: $(ev /work/runs42/preset-seed3-avg$n 4 1.4)"; done
