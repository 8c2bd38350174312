#!/usr/bin/env bash
# csan's main job and fairseq (../shared/peers/fairseq/run.sh) trained in alternating slices on one
# machine, so the day's drift in CPU speed (up to 1.8x between hours) falls on both: each round runs
# csan for MINUTES and fairseq for the same time, in ABBA order, each alone on the CPU. Prints each
# slice's median target tokens/s (csan: metrics.jsonl train lines; fairseq: train_inner wps) and the
# ratio per round. BLEU is not the point here (slices are minutes): the hour runs give that.
#
#   FSVENV=/path/to/fairseq-venv bash benchmarks/peer_speed_interleaved.sh OUT [ROUNDS] [MINUTES]
#   ATEN_CPU_CAPABILITY=avx2 ONEDNN_MAX_CPU_ISA=AVX2 ... (AVX2 emulated on a native-bf16 CPU)
#
# fairseq's data (its own joint SentencePiece 8k, binarised) is made once in OUT/fairseq-prep.
# SUMMARY_ONLY=1 ... OUT [ROUNDS]: recompute OUT/summary.txt from the slices already there.
# FIRST_ROUND=2 ... OUT 2 60: round 2 alone (fairseq's hour, then csan's); rounds before FIRST_ROUND
# that OUT does not hold are left out of the summary.
# CSAN_SET="model.attention_options.cnn.conv_layers=2 ...": more --set overrides for csan's slices.
# CSAN_SET_B="...": a second csan recipe ("csanb", CSAN_SET_B's overrides only) in every round, between
# the other two (csan csanb fairseq, then fairseq csanb csan), so two recipes meet fairseq in one sitting.
# CSAN_TEST=1: csan's slices score test2016 too (fairseq's always do). One round of 60 minutes is then
# the hour against fairseq with BLEU: CSAN_TEST=1 FSVENV=... bash benchmarks/peer_speed_interleaved.sh OUT 1 60
set -euo pipefail
out=$(mkdir -p "$1" && cd "$1" && pwd); rounds=${2:-2}; minutes=${3:-6}
repo=$(cd "$(dirname "$0")/.." && pwd)
peer=${FAIRSEQ_PEER:-$repo/../shared/peers/fairseq}  # FAIRSEQ_PEER=DIR: where run.sh and prep.py are
export CSAN_DATA=${CSAN_DATA:-$repo/../shared/data} TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD=1
hours=$(python3 -c "print($minutes / 60)")
median() { python3 - "$@" <<'PY'
import json, re, statistics, sys
kind, path = sys.argv[1], sys.argv[2]
if kind == "csan":
    v = [json.loads(l)["tokens_per_s"] for l in open(path) if '"kind": "train"' in l]
else:
    # train_inner lines only: the epoch and valid summaries also say "wps" (valid's is inference)
    v = [float(m.group(1)) for m in re.finditer(r"train_inner .*?\bwps=(\d+(?:\.\d+)?)", open(path).read())]
print(f"{statistics.median(v):.1f} {len(v)}")
PY
}
summarise() {  # OUT/summary.txt: csan / fairseq per round, from the slices' own logs
  : > "$out/summary.txt"
  for r in $(seq 1 "$rounds"); do
    [ -f "$out/csan-$r/metrics.jsonl" ] || [ "$r" -ge "${FIRST_ROUND:-1}" ] || continue  # not run here
    read -r c n < <(median csan "$out/csan-$r/metrics.jsonl"); read -r f m < <(median fairseq "$out/fairseq-$r/train.log")
    echo "round $r: csan $c over $n lines, fairseq $f over $m lines, csan / fairseq = $(python3 -c "print(f'{$c / $f:.3f}')")" | tee -a "$out/summary.txt"
    if [ -f "$out/csanb-$r/metrics.jsonl" ]; then
      read -r b k < <(median csan "$out/csanb-$r/metrics.jsonl")
      echo "round $r: csanb $b over $k lines, csanb / fairseq = $(python3 -c "print(f'{$b / $f:.3f}')"), csanb / csan = $(python3 -c "print(f'{$b / $c:.3f}')")" | tee -a "$out/summary.txt"
    fi
  done
  python3 - "$out/summary.txt" <<'PY' | tee -a "$out/summary.txt"
import re, statistics, sys
text = open(sys.argv[1]).read()
for who in ("csan", "csanb"):
    r = [float(x) for x in re.findall(rf"\b{who} / fairseq = ([\d.]+)", text)]
    if len(r) > 1:
        g = statistics.geometric_mean(r)
        print(f"all {len(r)} rounds: {who} / fairseq geometric mean {g:.3f}, range {min(r):.3f}-{max(r):.3f}")
PY
}
if [ "${SUMMARY_ONLY:-0}" = 1 ]; then summarise; exit 0; fi
peer_data=$peer/../../data/multi30k  # the Multi30k files run.sh and prep.py read
[ -f "$peer/run.sh" ] && [ -f "$peer/prep.py" ] && [ -d "$peer_data" ] || {
  echo "peer_speed_interleaved.sh: no fairseq peer at $peer (run.sh, prep.py, ../../data/multi30k);" \
    "set FAIRSEQ_PEER to the shared peers/fairseq folder" >&2; exit 2; }
{ date -u; git -C "$repo" log --oneline -1; "$repo/.venv/bin/csan" info | sed -n 1,2p; echo "csan overrides: ${CSAN_SET:-none}"
  [ -z "${CSAN_SET_B:-}" ] || echo "csanb overrides: $CSAN_SET_B"; } | tee "$out/machine.txt"
if [ ! -d "$out/fairseq-prep/bin" ]; then  # run.sh's own data step (its first lines), without its
  # training and its translation (an untrained model translates to the length limit: minutes)
  mkdir -p "$out/fairseq-prep"
  ( cd "$out/fairseq-prep" && export PATH=${FSVENV:?set FSVENV}/bin:$PATH &&
    python "$peer/prep.py" "$(cd "$peer_data" && pwd)" &&
    fairseq-preprocess --source-lang en --target-lang de --trainpref bpe/train --validpref bpe/valid \
      --testpref bpe/test2016 --destdir bin --joined-dictionary --workers 2 ) > "$out/fairseq-prep.out" 2>&1
fi
extra=(); for kv in ${CSAN_SET:-}; do extra+=(--set "$kv"); done
extrab=(); for kv in ${CSAN_SET_B:-}; do extrab+=(--set "$kv"); done
scoring=(--set train.evaluate_test=false); [ "${CSAN_TEST:-0}" != 1 ] || scoring=()
slice() {  # slice csan|csanb|fairseq NAME
  local d=$out/$2
  rm -rf "$d"
  if [ "$1" = csan ] || [ "$1" = csanb ]; then
    local sets=("${extra[@]}"); [ "$1" = csan ] || sets=("${extrab[@]}")
    "$repo/.venv/bin/csan" train --config multi30k-small --set "train.max_minutes=$minutes" \
      "${scoring[@]}" "${sets[@]}" --out "$d" > "$d.out" 2>&1
    median csan "$d/metrics.jsonl"
  else
    mkdir -p "$d" && cp -r "$out/fairseq-prep/bin" "$d/bin"
    # its speed is in train.log whether or not its test translation (after training) completes
    FSVENV=$FSVENV bash "$peer/run.sh" "$d" "$hours" > "$d.out" 2>&1 || echo "run.sh exited $?" >> "$d.out"
    median fairseq "$d/train.log"
  fi
}
for r in $(seq "${FIRST_ROUND:-1}" "$rounds"); do  # FIRST_ROUND=3 ... OUT 4: two more rounds
  mid=; [ -z "${CSAN_SET_B:-}" ] || mid=csanb
  if [ $((r % 2)) = 1 ]; then order="csan $mid fairseq"; else order="fairseq $mid csan"; fi
  for s in $order; do
    read -r med n < <(slice "$s" "$s-$r")
    echo "round $r $s: median $med target tokens/s over $n log lines ($(date -u +%H:%M))"
  done
done
summarise
