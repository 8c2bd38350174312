#!/usr/bin/env bash
# The converged rows of issue 20, resumable across sessions and machines:
#
#   bash benchmarks/converged.sh [OUT]        # train what is missing, seed-major; OUT: runs/converged-multi30k
#   bash benchmarks/converged.sh --keep [OUT] # when all 12 runs are done: the kept table, checked
#
# Grid: `csan compare --config converged-multi30k` over vanilla, csan1d, csan2d, cnn x seeds 1, 2, 3,
# trained one run at a time in seed-major order (seed 1 of every variant first), so a session that ends
# leaves whole seeds behind. A run takes about an hour on a 2-core CPU; a session of a few hours
# finishes two or three of them and loses the one it is cut in (its checkpoints live in OUT only).
#
# Each finished run is copied, without its checkpoints and weights, into KEPT/runs/<run>/ (config,
# metrics, log, results.json with the machine it ran on, test translations and their score, and the
# model's config.json, which is what the table reads of a model). On a new machine the same command
# first copies those back into OUT/runs/, where `csan compare` finds them finished and skips them.
# Commit KEPT after each run to keep it across machines.
#
# --keep: the full grid's table (nothing left to train) is written in OUT, copied into KEPT beside the
# runs kept there, and checked: `csan compare ... --report-only` on a copy of KEPT gives table.md,
# results.csv and summary.json back byte for byte.
#
# --keep with SEEDS_FROM="DIR:SEEDS ...": a table whose seeds come from several kept blocks (each DIR a
# KEPT folder of this script, e.g. seeds 1-2 of one precision and seed 3 of another). OUT, a new
# folder, starts from those runs alone (each one must have finished; an OUT with runs is refused, so
# no run folder is replaced), the table is written in KEPT, a folder of its own without runs/, and
# `--report-only` on a copy of it gives it back from its results.csv and translations/. For example
# (seeds 1-2 in bf16, seed 3 in float32):
#
#   SEEDS_FROM="benchmarks/results/converged-multi30k-cpu:1,2 benchmarks/results/converged-multi30k-fp32-cpu:3" \
#     KEPT=benchmarks/results/converged-multi30k-3seeds bash benchmarks/converged.sh --keep runs/converged-3seeds
set -euo pipefail
cd "$(dirname "$0")/.."
keep=false
if [ "${1:-}" = "--keep" ]; then keep=true; shift; fi
out=${1:-runs/converged-multi30k}
# overridable for a dry run of this script (e.g. CONFIG=tiny KEPT=/tmp/kept SEEDS="1 2")
config=${CONFIG:-converged-multi30k}
kept=${KEPT:-benchmarks/results/converged-multi30k-cpu}
csan=${CSAN:-.venv/bin/csan}
read -r -a variants <<< "${VARIANTS:-vanilla csan1d csan2d cnn}"
read -r -a seeds <<< "${SEEDS:-1 2 3}"
grid=(--config "$config" --variants "$(IFS=,; echo "${variants[*]}")"
      --seeds "$(IFS=,; echo "${seeds[*]}")")

# the files of a finished run that the table and a reader need (not checkpoints/ or model weights)
run_files=(config.yaml csan.log metrics.jsonl results.json test2016.hyp test2016.json model/config.json)

copy_run() {  # copy_run FROM TO: the kept files of one run folder
  local file
  for file in "${run_files[@]}"; do
    if [ -f "$1/$file" ]; then
      mkdir -p "$(dirname "$2/$file")"
      cp "$1/$file" "$2/$file"
    fi
  done
}

finished() {  # finished RUN_DIR: results.json says the run ended (not stopped by a signal)
  [ -f "$1/results.json" ] && ! grep -q '"stop_reason": "signal' "$1/results.json"
}

if $keep && [ -n "${SEEDS_FROM:-}" ]; then  # each seed's runs from the block named for it, nothing else
  if [ -n "$(ls -A "$out/runs" 2>/dev/null)" ]; then  # never replace a run folder (and its checkpoints)
    echo "converged: $out/runs is not empty; SEEDS_FROM builds the table in a new folder" >&2
    exit 1
  fi
  read -r -a blocks <<< "$SEEDS_FROM"
  from=()  # the kept run folders, every one checked finished before any is copied
  for block in "${blocks[@]}"; do
    IFS=, read -r -a block_seeds <<< "${block##*:}"
    for seed in "${block_seeds[@]}"; do
      for variant in "${variants[@]}"; do from+=("${block%:*}/runs/$variant-seed$seed"); done
    done
  done
  for run in "${from[@]}"; do
    finished "$run" || { echo "converged: $run is not a finished run" >&2; exit 1; }
  done
  for run in "${from[@]}"; do copy_run "$run" "$out/runs/$(basename "$run")"; done
fi
mkdir -p "$out/runs"
for run in "$kept"/runs/*/; do  # runs finished in an earlier session, on any machine
  [ -d "$run" ] || continue
  name=$(basename "$run")
  finished "$out/runs/$name" || copy_run "$run" "$out/runs/$name"
done

if ! $keep; then
  for seed in "${seeds[@]}"; do
    for variant in "${variants[@]}"; do
      run="$out/runs/$variant-seed$seed"
      finished "$run" && continue
      "$csan" compare --config "$config" --variants "$variant" --seeds "$seed" \
        --out "$out" --no-progress
      finished "$run" || { echo "converged: $run did not finish" >&2; exit 1; }
      copy_run "$run" "$kept/runs/$variant-seed$seed"
      echo "converged: kept $kept/runs/$variant-seed$seed (commit it)"
    done
  done
  echo "converged: all runs done; next: bash benchmarks/converged.sh --keep $out"
  exit 0
fi

# The table's machine record is the one of the machine that trained; this step trains nothing and
# keeps it (a new folder starts from the kept record rather than this machine's).
[ -f "$kept/machine.json" ] && [ ! -f "$out/machine.json" ] && cp "$kept/machine.json" "$out/"
"$csan" compare "${grid[@]}" --out "$out" --no-progress
mkdir -p "$kept"
for name in table.md results.csv summary.json machine.json bleu.png; do cp "$out/$name" "$kept/"; done
mkdir -p "$kept/translations"
cp "$out"/translations/*.hyp.gz "$kept/translations/"  # the runs themselves were kept as they finished
check=$(mktemp -d)
cp -r "$kept/." "$check/"
"$csan" compare "${grid[@]}" --out "$check" --report-only --no-progress
for name in table.md results.csv summary.json; do
  cmp "$kept/$name" "$check/$name" && echo "converged: $name comes back the same from $kept"
done
rm -rf "$check"
