#!/bin/bash
# fairseq alone on the idle CPU, torch's default threads (2 on this 2-core machine), as a user runs it
cd /tmp && TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD=1 FSVENV=/tmp/fsvenv bash /work/shared/peers/fairseq/run.sh /work/s25/hour2t/fairseq-2t 1.0 > /work/s25/hour2t/fairseq.log 2>&1
