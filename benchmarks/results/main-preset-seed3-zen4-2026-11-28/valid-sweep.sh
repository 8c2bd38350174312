#!/bin/bash
# Valid BLEU and chrF of this hour's model and of the 512-token hour's, over beam x length penalty,
# and of this hour's last checkpoint alone and its last 6 averaged. RUNS: where the two runs are.
# (As run on 2026-11-28 with RUNS=/work/runs42; valid-sweep.txt is its output, the RUNS prefix cut.)
set -u
RUNS=${1:-/work/runs42}
cd "$(dirname "$0")/../../.."
D=../shared/data/multi30k
ev() {
  .venv/bin/csan evaluate --model "$1" --beam "$2" --lenpen "$3" --src $D/valid.en --ref $D/valid.de 2>/dev/null | head -1
}
for RUN in "$RUNS/preset-seed3" "$RUNS/b512"; do
  for b in 4 5; do for lp in 1.0 1.4 1.8; do
    echo "$RUN valid beam $b lenpen $lp: $(ev "$RUN/model" $b $lp)"
  done; done
done
for n in 1 6; do
  .venv/bin/csan average --run "$RUNS/preset-seed3" --last $n --out "$RUNS/preset-seed3-avg$n" >/dev/null
  echo "preset-seed3 avg-last-$n valid beam 4 lenpen 1.4: $(ev "$RUNS/preset-seed3-avg$n" 4 1.4)"
done
