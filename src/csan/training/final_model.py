"""The end of a run: the final model folder, and its score on the test split."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import torch

from csan import checkpoint as ckpt
from csan.config import Config
from csan.data import EncodedSplit
from csan.decoding.translator import Translator
from csan.errors import CsanError
from csan.evaluation.bleu import score

__all__ = ["evaluate_test", "score_tests", "write_final_model"]


def write_final_model(
    run_dir: Path, model_dir: Path, average_last: int, *, cooldown_step: int | None = None
) -> str:
    """Write ``model_dir`` from the run's checkpoints; return how it was made.

    With ``average_last`` > 1: the average of the last N checkpoints, or of every checkpoint from
    ``cooldown_step`` on (the budget schedule's cooldown). Otherwise a copy of the best (else the
    last) checkpoint. Either way the config and subword model are the checkpoints' own.

    Example (a 4-step run of a 3-pair corpus, checkpointed every 2 steps):
        >>> from csan.toy import toy_run
        >>> run = toy_run()  # doctest: +ELLIPSIS
        machine: ...
        >>> write_final_model(run, run.parent / "averaged", 2)
        'average of 2 checkpoints (step_00000002, step_00000004)'
        >>> write_final_model(run, run.parent / "last", 1)
        'copy of step_00000004'
        >>> sorted(p.name for p in (run.parent / "averaged").iterdir())
        ['config.json', 'model.safetensors', 'spm.model']
    """
    # the checkpoints written only to resume from (a signal's, the timer's) are not averaged
    steps = ckpt.planned_step_folders(run_dir)
    if average_last > 1 and len(steps) >= 2:
        chosen = steps[-average_last:]
        if cooldown_step is not None:  # schedule "budget": every checkpoint of the cooldown
            cooldown = [p for p in steps if int(p.name.split("_")[1]) >= cooldown_step]
            chosen = cooldown if len(cooldown) >= 2 else chosen
        how = f"average of {len(chosen)} checkpoints ({', '.join(p.name for p in chosen)})"
    else:
        # not find_model_dir: it would pick an older model/ left by the run this one resumed
        source = ckpt.best_checkpoint(run_dir)
        if source is None:
            raise CsanError(
                f"{run_dir / 'checkpoints'}: no checkpoint to make the final model from"
            )
        chosen, how = [source], f"copy of {source.name}"
    ckpt.average_model_dirs(chosen, model_dir, made_from=how)
    return how


def evaluate_test(
    model_dir: Path,
    test: EncodedSplit,
    cfg: Config,
    run_dir: Path,
    *,
    device: torch.device,
    name: str | None = None,
) -> dict[str, Any]:
    """Translate ``test`` with the model in ``model_dir`` (beam search), score it with sacreBLEU,
    and write ``<name>.hyp`` and ``<name>.json`` into ``run_dir`` (``name``: default
    ``data.test_split``); return the record.

    Example (an untrained tiny model translating two sentences; its BLEU is near 0):
        >>> from csan.config import load_config
        >>> from csan.toy import toy_model
        >>> _ = torch.manual_seed(0)
        >>> folder, cfg = toy_model(), load_config("tiny")
        >>> test = EncodedSplit([[], []], [[], []], ["a dog runs .", "a dog ."],
        ...                     ["ein Hund rennt .", "ein Hund ."])
        >>> record = evaluate_test(folder, test, cfg, folder, device=torch.device("cpu"))
        >>> record["split"], record["beam"], 0 <= record["bleu"] <= 100, record["signature"][:7]
        ('test2016', 2, True, 'nrefs:1')
        >>> len((folder / "test2016.hyp").read_text().splitlines())  # one line per sentence
        2
        >>> json.loads((folder / "test2016.json").read_text())["bleu"] == record["bleu"]
        True
    """
    translator = Translator.from_dir(model_dir, device=device)
    dc = cfg.decode
    t0 = time.monotonic()
    hyps = translator.translate(
        test.src_text, beam=dc.beam, lenpen=dc.lenpen, max_tokens=dc.max_tokens
    )
    seconds = time.monotonic() - t0
    s = score(hyps, test.tgt_text)
    name = name or cfg.data.test_split
    (run_dir / f"{name}.hyp").write_text("\n".join(hyps) + "\n", encoding="utf-8")
    result = {
        "split": name,
        "bleu": s.bleu,
        "chrf": s.chrf,
        "signature": s.signature,
        "beam": dc.beam,
        "lenpen": dc.lenpen,
        "translate_seconds": round(seconds, 2),
        "sentences_per_s": round(len(hyps) / max(seconds, 1e-9), 2),
    }
    (run_dir / f"{name}.json").write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    return result


def score_tests(
    model_dir: Path,
    tests: Mapping[str, EncodedSplit],
    cfg: Config,
    run_dir: Path,
    *,
    device: torch.device,
    say: Callable[[str], None] = print,
) -> dict[str, dict[str, Any]]:
    """Score every test set with :func:`evaluate_test`, saying each score; return name -> record.

    Example (an untrained tiny model on two one-sentence test sets):
        >>> from csan.config import load_config
        >>> from csan.toy import toy_model
        >>> _ = torch.manual_seed(0)
        >>> folder, cfg = toy_model(), load_config("tiny")
        >>> tests = {name: EncodedSplit([[]], [[]], ["a dog runs ."], ["ein Hund rennt ."])
        ...          for name in ("test2016", "test2017")}
        >>> cpu = torch.device("cpu")
        >>> records = score_tests(folder, tests, cfg, folder, device=cpu)  # doctest: +ELLIPSIS
        test2016 BLEU = ...  chrF = ...  (nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|version:...)
        test2017 BLEU = ...
        >>> sorted(records)
        ['test2016', 'test2017']
        >>> sorted(p.name for p in folder.glob("test*"))
        ['test2016.hyp', 'test2016.json', 'test2017.hyp', 'test2017.json']
    """
    records: dict[str, dict[str, Any]] = {}
    for name, test in tests.items():
        record = evaluate_test(model_dir, test, cfg, run_dir, device=device, name=name)
        records[name] = record
        say(
            f"{name} BLEU = {record['bleu']:.2f}  chrF = {record['chrf']:.2f}  "
            f"({record['signature']})"
        )
    return records
