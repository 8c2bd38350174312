#!/bin/bash
# the README's first command as written, in a fresh clone, alone on the idle CPU (torch's default threads)
set -e
rev=$1
rm -rf /work/hour4 && git clone -q /work/main /work/hour4 && cd /work/hour4 && git checkout -q "$rev"
date -u +%T > /work/s25/hour2t/csan.start
( time ( bash scripts/setup.sh && CSAN_DATA=../shared/data .venv/bin/csan train --config multi30k-small --out runs/multi30k-small ) ) > /work/s25/hour2t/csan.log 2>&1
date -u +%T > /work/s25/hour2t/csan.end
