#!/bin/bash
# old (ad3ecac) vs new (working tree) compiled bf16 step at 1,024 tokens, alternated, fresh processes, alone on the CPU
cd /work/main
git worktree add -q /tmp/ab-old ad3ecac 2>/dev/null
export CSAN_DATA=$PWD/../shared/data
for r in 1 2 3 4 5; do for v in old new; do
  if [ $v = old ]; then PP=/tmp/ab-old/src; else PP=$PWD/src; fi
  echo -n "$r $v "
  PYTHONPATH=$PP .venv/bin/python benchmarks/profile_train_step.py --label $v-$r --out /work/runs36/ab2 \
    --set train.max_tokens=1024 --warmup 12 --steps 60 --profile-steps 1 2>&1 | grep -o "median step [0-9.]* ms"
done; done
git worktree remove --force /tmp/ab-old
