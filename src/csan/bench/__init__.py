"""Benchmarks as commands (``csan bench ...``); each prints a table and keeps it with the machine.

- :mod:`csan.bench.attention`: windowed attention kernels against band-masked SDPA (``attention``);
- :mod:`csan.bench.long`: training at document lengths, where dense attention runs out (``long``);
- :mod:`csan.bench.train`: csan's training step against ``torch.nn.Transformer`` (``train``);
- :mod:`csan.bench.translate`: beam-search sentences per second (``translate``);
- :mod:`csan.bench.variants`: a compare table's rows side by side (``variants``);
- :mod:`csan.bench.nmt`: the parser of the last three.
"""
