#!/usr/bin/env bash
# Valid BLEU and chrF (beam 4, penalty 1.4: the preset's; csan evaluate's summary line) of this
# folder's two hours' final models, and sacreBLEU's paired bootstrap of their test2016 translations
# against the preset's seed-1 and seed-3 hours. RUNS: where the two runs are. (As run on 2026-11-28
# with RUNS=/work/runs43; score.txt is its output.)
set -u
RUNS=${1:-/work/runs43}
cd "$(dirname "$0")/../../.."
D=../shared/data/multi30k
for RUN in ls02 cnn2-seed3; do
  echo "$RUN valid beam 4 lenpen 1.4: $(.venv/bin/csan evaluate --model "$RUNS/$RUN/model" --beam 4 --lenpen 1.4 \
    --src $D/valid.en --ref $D/valid.de 2>/dev/null | head -1)"
done
R=benchmarks/results
HERE=$R/main-hours-zen4-2026-11-28
for BASE in main-preset-fresh-zen4-2026-11-27 main-preset-seed3-zen4-2026-11-28; do
  echo "paired bootstrap against $BASE/test2016.hyp:"
  SACREBLEU_SEED=12345 COLUMNS=250 .venv/bin/sacrebleu $D/test2016.de -i $R/$BASE/test2016.hyp \
    "$HERE/ls0.2/test2016.hyp" "$HERE/cnn2-seed3/test2016.hyp" -m bleu chrf --paired-bs -f text
done
