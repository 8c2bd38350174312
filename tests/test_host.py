"""csan.host: the hypervisor's steal read from /proc/stat, and how runs and benchmarks report it."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from csan.host import (
    NOTE_SHARE,
    CpuTimes,
    HostMeter,
    StealMeter,
    product_rate,
    product_rates,
    steal_note,
    steal_share,
)
from csan.training.records import train_line

# /proc/stat's first line as Linux writes it: user nice system idle iowait irq softirq steal guest gn
STAT = (
    "cpu  1087497 3 25910 7646142 2617 11 722 14003 0 0\ncpu0 543748 1 12955 3823071 0 0 0 0 0 0\n"
)


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "stat"
    path.write_text(text)
    return path


def test_reads_busy_and_steal_ticks_from_the_cpu_line(tmp_path):
    times = CpuTimes.read(write(tmp_path, STAT))
    # busy: user + nice + system + irq + softirq; idle and iowait are not work
    assert times == CpuTimes(busy=1087497 + 3 + 25910 + 11 + 722, steal=14003)


@pytest.mark.parametrize(
    "text",
    [
        "",  # empty
        "cpu0 1 2 3 4 5 6 7 8\n",  # no all-CPU line first
        "cpu  1 2 3 4 5 6 7\n",  # a kernel too old to count steal
        "cpu  1 2 x 4 5 6 7 8 0 0\n",  # not numbers
    ],
)
def test_an_unreadable_stat_file_gives_none(tmp_path, text):
    assert CpuTimes.read(write(tmp_path, text)) is None


def test_a_missing_or_binary_stat_file_gives_none(tmp_path):
    assert CpuTimes.read(tmp_path / "absent") is None
    (tmp_path / "binary").write_bytes(b"\xff\xfe cpu 1 2")
    assert CpuTimes.read(tmp_path / "binary") is None


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc/stat is Linux's")
def test_this_machine_counts_ticks():
    first = CpuTimes.read()
    assert first is not None and first.busy > 0 and first.steal >= 0
    sum(i * i for i in range(200_000))  # some work, so that the counters cannot go back
    later = CpuTimes.read()
    assert later.busy >= first.busy and later.steal >= first.steal


def test_the_share_is_of_the_time_the_cpus_had_work_for():
    before = CpuTimes(busy=1_000, steal=100)
    # 600 ticks of work done, 400 ticks owed and run elsewhere: 40% of the wanted time was taken
    assert steal_share(before, CpuTimes(busy=1_600, steal=500)) == 0.4
    assert steal_share(before, CpuTimes(busy=1_600, steal=100)) == 0.0
    assert steal_share(before, CpuTimes(busy=1_000, steal=300)) == 1.0


@pytest.mark.parametrize(
    "before, after",
    [
        (None, CpuTimes(1, 1)),
        (CpuTimes(1, 1), None),
        (CpuTimes(5, 5), CpuTimes(5, 5)),  # no tick passed: unknown, not 0
        (CpuTimes(5, 5), CpuTimes(4, 6)),  # counters that went back (another boot): unknown
    ],
)
def test_the_share_is_none_when_it_cannot_be_known(before, after):
    assert steal_share(before, after) is None


def test_the_meter_laps_and_totals():
    readings = iter(
        [CpuTimes(0, 0), CpuTimes(80, 20), CpuTimes(80, 20), CpuTimes(180, 20), CpuTimes(180, 20)]
    )
    meter = StealMeter(read=readings.__next__)
    assert meter.lap() == 0.2  # the first lap runs from the start
    assert meter.lap() is None  # no tick since
    assert meter.lap() == 0.0  # 100 ticks of work, none taken
    assert meter.total() == 0.1  # 20 of 200 since the start
    blind = StealMeter(read=lambda: None)
    assert blind.lap() is None and blind.total() is None


def test_only_a_share_that_matters_is_named():
    assert steal_note(None) == "" and steal_note(0.0) == ""
    assert steal_note(NOTE_SHARE - 0.001) == ""
    assert steal_note(NOTE_SHARE) == "host steal 5%"
    assert steal_note(0.452) == "host steal 45%"


def test_a_train_line_names_a_large_steal_and_only_that():
    record = {"kind": "train", "step": 50, "epoch": 0.1, "loss": 9.0, "nll": 8.0, "lr": 1e-4,
              "tokens_per_s": 1040.0, "train_seconds": 30.0}  # fmt: skip
    assert "steal" not in train_line(record)
    assert "steal" not in train_line({**record, "host_steal": 0.02})
    line = train_line({**record, "host_steal": 0.35}, eta="36m11s")
    assert line.endswith("1,040 tok/s (host steal 35%), eta 36m11s")


def test_the_product_rate_is_a_rate_and_bf16_is_probed_only_where_native():
    rate = product_rate(calls=3)
    assert rate > 0.1  # GFLOP/s of a 1024x256 @ 256x1024 product: any CPU of this century
    assert set(product_rates(native_bf16=False)) == {"float32_gflops"}


def test_the_host_meter_takes_products_at_the_start_and_the_end():
    calls = []

    def rates() -> dict[str, float]:
        calls.append(len(calls))
        return {"float32_gflops": 100.0 - 40 * len(calls)}

    readings = iter([CpuTimes(0, 0), CpuTimes(80, 20)])
    meter = HostMeter(rates=rates, read=readings.__next__)
    assert calls == [0]  # the start's, when the meter is made
    record = meter.record()
    assert record["host_products"] == {
        "start": {"float32_gflops": 60.0},
        "end": {"float32_gflops": 20.0},
    }
    assert record["host_steal"] == 0.2


def test_a_harness_can_leave_out_the_start_or_all_products():
    rates = lambda: {"float32_gflops": 7.0}  # noqa: E731
    assert HostMeter(at_start=False, rates=rates).record()["host_products"] == {
        "start": None,
        "end": {"float32_gflops": 7.0},
    }
    assert "host_products" not in HostMeter(products=False, rates=rates).record()
