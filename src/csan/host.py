"""What the host gave this machine: the hypervisor's *steal*, from ``/proc/stat``, and the speed of
one matrix product.

On a virtual machine the host may run other guests on the physical cores this one's work is waiting
for; Linux counts that time as ``steal``. A training step then takes longer for reasons that are not
csan's, and a figure taken under it compares with nothing. So every run and benchmark records the
share of the CPU time it wanted that the host took, and says so when it is large enough to matter
(:data:`NOTE_SHARE`).

The share over an interval is ``steal / (busy + steal)``: of the ticks in which this machine's CPUs
had work (``user + nice + system + irq + softirq``), or were owed it (``steal``), the part they did
not get. It is machine-wide (other processes count too), which is why a figure is taken on an
otherwise idle machine. Where ``/proc/stat`` is missing (macOS, Windows) it is None.

Steal is not the whole story: on 2026-12-03 the preset trained at 1,500 target tokens/s under 13-16%
steal on a VM where it had done 4,548 the morning before, because the host ran the same products
slower per tick it gave (a busy sibling core, a lower clock, shared caches), which ``/proc/stat``
cannot see. :func:`product_rate` measures that directly: the GFLOP/s of one fixed matrix product,
which a run takes at its start and end and keeps beside the steal.

Example:
    >>> meter = StealMeter(read=iter([CpuTimes(busy=0, steal=0), CpuTimes(busy=550, steal=450)]).__next__)
    >>> meter.lap()
    0.45
    >>> steal_note(0.45)
    'host steal 45%'
"""

from __future__ import annotations

import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

__all__ = [
    "NOTE_SHARE",
    "CpuTimes",
    "HostMeter",
    "StealMeter",
    "product_rate",
    "product_rates",
    "report_steal",
    "steal_note",
    "steal_share",
    "steal_warning",
]

PROC_STAT = Path("/proc/stat")
# a share of steal worth printing: below it, the host's drift between days is the larger error
NOTE_SHARE = 0.05
# /proc/stat's "cpu" line: user nice system idle iowait irq softirq steal guest guest_nice
_BUSY_FIELDS = (0, 1, 2, 5, 6)
_STEAL_FIELD = 7


@dataclass(frozen=True)
class CpuTimes:
    """Clock ticks of all CPUs since boot: busy (user, nice, system, irq, softirq) and steal."""

    busy: int
    steal: int

    @classmethod
    def read(cls, path: Path = PROC_STAT) -> CpuTimes | None:
        """The ticks now, from the ``cpu`` line of ``path``; None where it cannot be read.

        Example:
            >>> import tempfile
            >>> stat = Path(tempfile.mkdtemp()) / "stat"
            >>> _ = stat.write_text("cpu  1087497 0 25910 7646142 2617 0 722 14003 0 0\\ncpu0 ...\\n")
            >>> CpuTimes.read(stat)
            CpuTimes(busy=1114129, steal=14003)
            >>> CpuTimes.read(stat.parent / "missing") is None
            True
        """
        try:
            with open(path, encoding="ascii") as f:
                first = f.readline().split()
        except (OSError, UnicodeDecodeError):
            return None
        if len(first) < 2 + _STEAL_FIELD or first[0] != "cpu":
            return None
        try:
            ticks = [int(x) for x in first[1 : 2 + _STEAL_FIELD]]
        except ValueError:
            return None
        return cls(busy=sum(ticks[i] for i in _BUSY_FIELDS), steal=ticks[_STEAL_FIELD])


def steal_share(before: CpuTimes | None, after: CpuTimes | None) -> float | None:
    """The share of the wanted CPU time the host took between two readings, in [0, 1]; None when
    either reading is missing or no tick passed.

    Example:
        >>> steal_share(CpuTimes(busy=100, steal=10), CpuTimes(busy=2188, steal=1832))
        0.466
        >>> steal_share(None, CpuTimes(busy=1, steal=0)) is None
        True
    """
    if before is None or after is None:
        return None
    busy, steal = after.busy - before.busy, after.steal - before.steal
    if busy < 0 or steal < 0 or busy + steal == 0:
        return None
    return round(steal / (busy + steal), 3)


def steal_note(share: float | None) -> str:
    """``"host steal 45%"`` for a share of at least :data:`NOTE_SHARE`, else ``""``.

    Example:
        >>> steal_note(0.021), steal_note(None), steal_note(0.083)
        ('', '', 'host steal 8%')
    """
    if share is None or share < NOTE_SHARE:
        return ""
    return f"host steal {share:.0%}"


def steal_warning(share: float | None, consequence: str) -> str:
    """The line a benchmark prints under its table when :func:`steal_note` names the share, else
    ``""``; ``consequence`` says what it did to the figures.

    Example:
        >>> steal_warning(0.3, "the times are above this CPU's own")
        "warning: host steal 30% while measuring: the times are above this CPU's own"
        >>> steal_warning(0.01, "the times are above this CPU's own")
        ''
    """
    note = steal_note(share)
    return f"warning: {note} while measuring: {consequence}" if note else ""


def report_steal(share: float | None, consequence: str) -> None:
    """Print :func:`steal_warning` to stderr when there is one: a diagnostic, not a figure, so it
    stays out of the stream that carries a benchmark's table.

    Example:
        >>> report_steal(0.01, "the times are above this CPU's own")  # under 5%: prints nothing
    """
    if warning := steal_warning(share, consequence):
        print(warning, file=sys.stderr)


class StealMeter:
    """The host's steal since the meter started (:meth:`total`) and since the last :meth:`lap`.

    ``read`` takes the readings (:meth:`CpuTimes.read` by default; a test passes its own).

    Example:
        >>> readings = iter([CpuTimes(0, 0), CpuTimes(90, 10), CpuTimes(180, 20), CpuTimes(180, 20)])
        >>> meter = StealMeter(read=readings.__next__)
        >>> meter.lap(), meter.lap(), meter.total()
        (0.1, 0.1, 0.1)
    """

    def __init__(self, *, read: Callable[[], CpuTimes | None] = CpuTimes.read) -> None:
        self._read = read
        self.start = self._last = read()

    def lap(self) -> float | None:
        """The share since the previous lap (or the start); the next lap starts now."""
        now = self._read()
        share = steal_share(self._last, now)
        self._last = now
        return share

    def total(self) -> float | None:
        """The share since the meter started."""
        return steal_share(self.start, self._read())


# the probe's product: (M, K) @ (K, N), the size of a training step's feed-forward products
_PROBE_SHAPE = (1024, 256, 1024)


def product_rate(dtype: torch.dtype = torch.float32, *, calls: int = 7, warmup: int = 5) -> float:
    """GFLOP/s of a 1024x256 @ 256x1024 product in ``dtype`` on this process's threads: the median
    of ``calls`` timed calls after ``warmup`` untimed ones and 0.05 s (about 0.08 s on 2 cores).

    It is the host's speed on the day, for figures from different days, and a coarse one: on the
    noisy 2-core Xeon of 2026-12-03, readings a few seconds apart varied by up to 25%, so it tells a
    host twice as slow, not one 10% slower. A run keeps it in ``results.json``
    (``machine.host_products``) at its start and end. Measure bf16 only where the CPU has it natively
    (:func:`csan.machine.describe_machine`): emulated, one call takes seconds.

    Example:
        >>> product_rate(calls=3) > 0
        True
    """
    m, k, n = _PROBE_SHAPE
    gen = torch.Generator().manual_seed(0)
    a = torch.randn(m, k, generator=gen).to(dtype)
    b = torch.randn(k, n, generator=gen).to(dtype)
    with torch.no_grad():
        # warm up for ``warmup`` calls and at least 0.05 s: a process's first products run slower
        # (its threads and the core's clock wake up), which is not the host's rate
        begin, done = time.perf_counter(), 0
        while done < warmup or time.perf_counter() - begin < 0.05:
            torch.mm(a, b)
            done += 1
        times = []
        for _ in range(calls):
            start = time.perf_counter()
            torch.mm(a, b)
            times.append(time.perf_counter() - start)
    return round(2 * m * k * n / statistics.median(times) / 1e9, 1)


def product_rates(native_bf16: bool | None = None) -> dict[str, float]:
    """``{"float32_gflops": ..., "bf16_gflops": ...}`` (bf16 only where ``native_bf16``; None asks
    :func:`csan.machine.describe_machine` whether this CPU has it).

    Example:
        >>> sorted(product_rates(native_bf16=False))
        ['float32_gflops']
    """
    if native_bf16 is None:
        from csan.machine import describe_machine  # csan.machine does not import this module

        native_bf16 = describe_machine().native_bf16
    rates = {"float32_gflops": product_rate(torch.float32)}
    if native_bf16:
        rates["bf16_gflops"] = product_rate(torch.bfloat16)
    return rates


class HostMeter:
    """What the host gave a run or a benchmark: the steal (:class:`StealMeter`) and the product
    rate (:func:`product_rates`) at the start and the end, for the machine record.

    ``rates`` and ``read`` take the products and the ticks (the defaults measure; a test passes its
    own). ``at_start=False`` takes the products at the end only (a harness that must not run anything
    before its first case); ``products=False`` not at all (a rank that keeps no record).

    Example:
        >>> meter = HostMeter(rates=lambda: {"float32_gflops": 50.0})
        >>> record = meter.record()
        >>> sorted(record), record["host_products"]
        (['host_products', 'host_steal'], {'start': {'float32_gflops': 50.0}, 'end': {'float32_gflops': 50.0}})
    """

    def __init__(
        self,
        *,
        products: bool = True,
        at_start: bool = True,
        rates: Callable[[], dict[str, float]] | None = None,
        read: Callable[[], CpuTimes | None] = CpuTimes.read,
    ) -> None:
        self.steal = StealMeter(read=read)
        self._rates = rates or product_rates
        self._products = products
        self.start_products = self._rates() if products and at_start else None

    def lap(self) -> float | None:
        """The steal since the previous lap (:meth:`StealMeter.lap`)."""
        return self.steal.lap()

    def record(self) -> dict[str, Any]:
        """``host_steal`` (since the start; taken before the end's products, which it does not
        count) and, unless ``products=False``, ``host_products`` (``start`` and ``end``)."""
        out: dict[str, Any] = {"host_steal": self.steal.total()}
        if self._products:
            out["host_products"] = {"start": self.start_products, "end": self._rates()}
        return out
