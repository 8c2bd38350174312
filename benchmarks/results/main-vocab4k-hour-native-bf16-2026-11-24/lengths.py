"""Mean pieces per sentence over Multi30k's training pairs, for three vocabulary sizes.

The subword models and ids come from csan's own data layer (joint BPE, byte fallback), the way
`csan train --set data.vocab_size=N` learns them; the results are cached under a temporary folder.

    python benchmarks/results/main-vocab4k-hour-native-bf16-2026-11-24/lengths.py ../shared/data/multi30k
"""

import sys
import tempfile

from csan.data.prepared import prepare_corpus

folder = sys.argv[1] if len(sys.argv) > 1 else "../shared/data/multi30k"
with tempfile.TemporaryDirectory() as cache:
    for vocab in (4000, 6000, 8000):
        train = prepare_corpus(
            folder,
            src_lang="en",
            tgt_lang="de",
            splits=["train"],
            vocab_size=vocab,
            cache_dir=cache,
        ).splits["train"]
        src = sum(map(len, train.src)) / len(train.src)
        tgt = sum(map(len, train.tgt)) / len(train.tgt)
        print(f"vocabulary {vocab}: {src:.2f} source and {tgt:.2f} target pieces a sentence")
