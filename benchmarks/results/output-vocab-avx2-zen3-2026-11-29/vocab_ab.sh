#!/usr/bin/env bash
# preset (full output vocabulary) / model.output_vocab=target, alternated, one process each
cd "$(dirname "$0")/../profile-avx2-zen3-2026-11-29"
export CSAN_DATA=${CSAN_DATA:-../../../../shared/data}
P=${PYTHON:-python}
for r in 1 2 3 4; do
  $P step_ab.py
  $P step_ab.py model.output_vocab=target
done
