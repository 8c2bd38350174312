"""Paired significance tests: the numbers are sacreBLEU's own (its command line on the same files), the
test is two-sided, tells a clearly better system apart, and says what is wrong with its input."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from synthetic_corpus import BAD, GOOD, REFS, corrupt

from csan.errors import CsanError
from csan.evaluation import describe_method, paired_test

CLOSE_A, CLOSE_B = corrupt(REFS, 0.3, seed=10), corrupt(REFS, 0.3, seed=20)


def write(path: Path, lines: list[str]) -> str:
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return str(path)


@pytest.mark.parametrize("method", ["bs", "ar"])
def test_the_numbers_are_what_the_sacrebleu_command_prints(tmp_path: Path, method: str) -> None:
    files = [
        write(tmp_path / n, lines) for n, lines in (("ref", REFS), ("a", CLOSE_A), ("b", CLOSE_B))
    ]
    flag = {"bs": "--paired-bs", "ar": "--paired-ar"}[method]
    command = [sys.executable, "-m", "sacrebleu", files[0], "-i", *files[1:], "-m", "bleu", flag]
    printed = json.loads(
        subprocess.run([*command, "-f", "json"], capture_output=True, text=True, check=True).stdout
    )
    ours = paired_test(("a", CLOSE_A), [("b", CLOSE_B)], REFS, method=method)
    (cli_base, cli_sys) = (entry["BLEU"] for entry in printed)
    assert ours.baseline.bleu == pytest.approx(cli_base["score"], abs=1e-9)
    assert ours.systems[0].bleu == pytest.approx(cli_sys["score"], abs=1e-9)
    assert ours.systems[0].p_value == pytest.approx(cli_sys["p_value"], abs=1e-12)
    assert 0.05 < ours.systems[0].p_value < 0.95  # close systems: a p that could have moved
    if method == "bs":  # the command prints the interval with the bootstrap only
        assert ours.systems[0].mean == pytest.approx(cli_sys["mean"], abs=1e-9)
        assert ours.systems[0].ci == pytest.approx(cli_sys["ci"], abs=1e-9)
    assert ours.systems[0].ci > 0 and ours.baseline.ci > 0  # "ar" gets one from its own bootstrap
    assert f"{method}:{ours.samples}|seed:12345" in ours.signature


@pytest.mark.parametrize("method", ["bs", "ar"])
def test_the_test_is_two_sided(method: str) -> None:
    forward = paired_test(("a", CLOSE_A), [("b", CLOSE_B)], REFS, method=method)
    backward = paired_test(("b", CLOSE_B), [("a", CLOSE_A)], REFS, method=method)
    assert forward.systems[0].p_value == pytest.approx(backward.systems[0].p_value, abs=1e-12)


@pytest.mark.parametrize("method", ["bs", "ar"])
def test_a_clearly_better_or_worse_system_is_told_apart(method: str) -> None:
    result = paired_test(("bad", BAD), [("good", GOOD), ("same", BAD)], REFS, method=method)
    good, same = result.systems
    assert good.bleu > result.baseline.bleu + 10
    assert good.p_value < 0.01
    assert same.bleu == result.baseline.bleu  # the baseline's own translations


def test_input_is_checked() -> None:
    with pytest.raises(CsanError, match=r"^1 hypotheses but 2 references: they must be parallel$"):
        paired_test(("a", ["x y", "z"]), [("b", ["x"])], ["x y", "z"])
    with pytest.raises(CsanError, match=r"system names must differ, got \['a', 'a'\]"):
        paired_test(("a", ["x"]), [("a", ["x"])], ["x"])
    with pytest.raises(CsanError, match=r"significance test 'boot': use 'bs' .* or 'ar' "):
        paired_test(("a", ["x"]), [("b", ["x"])], ["x"], method="boot")
    assert "10,000 trials" in describe_method("ar")
