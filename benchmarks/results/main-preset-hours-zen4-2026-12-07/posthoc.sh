#!/usr/bin/env bash
# post-hoc: decode settings and checkpoint averages of one run, scored on valid
set -euo pipefail
RUN=$1; OUT=$2; CSAN=${CSAN:-csan}
D=${CSAN_DATA:-../shared/data}/multi30k
mkdir -p $OUT
ev() { # model beam lenpen label
  local r; r=$($CSAN evaluate --model $1 --beam $2 --lenpen $3 --src $D/valid.en --ref $D/valid.de --json)
  echo "$4 beam=$2 lenpen=$3 $r" | tee -a $OUT/valid-grid.txt
}
: > $OUT/valid-grid.txt
for b in 4 5; do for a in 1.0 1.4 1.8; do ev $RUN/model $b $a final; done; done
for n in 5 20; do
  $CSAN average --run $RUN --last $n --out /tmp/posthoc-avg$n --force >> $OUT/averages.txt
  ev /tmp/posthoc-avg$n 4 1.4 last$n
  rm -rf /tmp/posthoc-avg$n
done
