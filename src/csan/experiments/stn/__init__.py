"""``csan stn``: spatial transformer networks on distorted MNIST (Jaderberg et al. 2015, Table 1).

Rows (a CNN, the same CNN behind an affine, a projective or a thin-plate-spline transformer, an FCN
with and without an affine one) x distortions (R, RTS, P, E, cluttered) x seeds, trained into one
folder, resumable; then a table of test error mean ± sd with a paired sign test against the plain
network, the figures (inputs against what the transformer made of them; test error over steps) and
the machine record::

    csan stn --preset smoke --out runs/stn-smoke      # every row on RTS, one seed: minutes
    csan stn --preset mnist --out runs/stn            # the whole table: a few hours on 2 cores

- :mod:`csan.experiments.stn.config`: settings and presets; :mod:`~csan.experiments.stn.models`: the
  classifiers; :mod:`~csan.experiments.stn.data`: the distorted sets; :mod:`~csan.experiments.stn.train`:
  one resumable run; :mod:`~csan.experiments.stn.report`: the table and the test;
  :mod:`~csan.experiments.stn.figures`: the PNGs; :mod:`~csan.experiments.stn.run`: all of it.

Example:
    >>> stn_config("smoke").distortions
    ('RTS',)
"""

from csan.experiments.stn.config import PRESETS, StnConfig, stn_config
from csan.experiments.stn.models import ROWS, build_model
from csan.experiments.stn.run import run_stn

__all__ = ["PRESETS", "ROWS", "StnConfig", "build_model", "run_stn", "stn_config"]
