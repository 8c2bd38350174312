"""Experiments as commands: the papers' tables and figures from our own runs.

- :func:`run_compare` (``csan compare``): Table 1 of Yang et al. (NAACL 2019), the context-aware table
  (AAAI 2019) and the conv-projection runs: variants x seeds trained into one folder, a table with
  parameters, speed, BLEU mean ± sd, delta and sacreBLEU's paired test per seed, a CSV, a bar chart
  and the test translations, from which ``--report-only`` rewrites the table without the runs.
- :func:`run_ablation` (``csan ablate``): validation BLEU over the window sizes (Fig. 2).
- :func:`ngram_report` / :func:`convergence_runs` (``csan analyze``): n-gram gaps (Fig. 3) and epochs
  to a validation accuracy.
- :func:`sentence_attention` / :func:`plot_attention` (``csan plot attention``): per-head heat maps.

The papers' experiments on Multi30k (preset ``compare-multi30k``: 4 epochs a run, about 12 minutes a
run on a 2-core CPU, ~4 hours for the first command; see the preset's header)::

    csan compare --config compare-multi30k --variants table1,convs2s --seeds 1,2 --out runs/table1
    csan compare --config compare-multi30k --variants context --seeds 1 --out runs/context
    csan compare --config compare-multi30k --variants conv --seeds 1 --out runs/conv
    csan analyze convergence --runs runs/conv --out runs/conv/convergence
    csan ablate --config compare-multi30k --variant csan1d --out runs/ablate
    csan analyze ngram --ref test2016.de --baseline runs/table1/runs/vanilla-seed1/test2016.hyp \
        --systems csan2d=runs/table1/runs/csan2d-seed1/test2016.hyp --out runs/ngram
    csan plot attention --model runs/table1/runs/csan2d-seed1 --sentence "A dog runs." --out a.png

Example:
    >>> from csan.config import load_config
    >>> [v.name for v in resolve_variants(["table1"], load_config("tiny"))][:3]
    ['vanilla', 'rel_pos', 'neighbor']
"""

from csan.experiments.ablate import run_ablation
from csan.experiments.analyze import convergence_runs, ngram_report
from csan.experiments.attention_maps import plot_attention, sentence_attention
from csan.experiments.compare import run_compare
from csan.experiments.grid import run_grid
from csan.experiments.variants import Variant, resolve_variants

__all__ = [
    "Variant",
    "convergence_runs",
    "ngram_report",
    "plot_attention",
    "resolve_variants",
    "run_ablation",
    "run_compare",
    "run_grid",
    "sentence_attention",
]
