"""One entry from a model folder to translations: :func:`load_model` and :class:`Translator`.

``csan translate``, ``csan evaluate``, the end of a training run, ``csan bench translate`` and
``csan plot`` all come through here: find the folder (a model folder, or a run folder's model),
read its config and weights (safetensors, never a pickle), build the model, and translate with the
folder's own subword model and decoding settings.

Example:
    >>> Translator.from_dir("/nonexistent")  # doctest: +IGNORE_EXCEPTION_DETAIL
    Traceback (most recent call last):
    csan.errors.CsanError: /nonexistent: no such model folder
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import nn

from csan.checkpoint import find_model_dir, load_weights, read_model_meta, read_spm
from csan.config import Config, config_from_dict
from csan.data import SubwordModel
from csan.decoding.translate import translate_lines
from csan.models import build_model

__all__ = ["LoadedModel", "Translator", "load_model"]


@dataclass
class LoadedModel:
    """A model read back from a model folder, with what it needs to translate.

    Example (an untrained tiny model saved, then read back by :func:`load_model`):
        >>> import tempfile
        >>> from csan.toy import toy_model
        >>> folder = Path(tempfile.mkdtemp())
        >>> _ = toy_model(folder, ["model.encoder_attention=csan1d"], step=40)
        >>> loaded = load_model(folder)
        >>> type(loaded.model).__name__, loaded.model.training, loaded.model.vocab_size
        ('Transformer', False, 300)
        >>> loaded.config.model.encoder_attention, loaded.meta["step"], loaded.folder == folder
        ('csan1d', 40, True)
        >>> len(SubwordModel.from_bytes(loaded.spm_bytes))
        300
    """

    model: nn.Module
    config: Config
    spm_bytes: bytes
    folder: Path
    meta: dict[str, Any]


def load_model(path: str | os.PathLike[str], *, device: str | torch.device = "cpu") -> LoadedModel:
    """Load a model folder (or a run folder's model) in eval mode on ``device``.

    Example (an untrained tiny model saved as a run's ``model/``, loaded by the run folder):
        >>> import tempfile
        >>> from csan.toy import toy_model
        >>> run = Path(tempfile.mkdtemp())
        >>> _ = toy_model(run / "model", ["model.encoder_attention=csan2d"])
        >>> loaded = load_model(run, device="cpu")
        >>> loaded.folder == run / "model", loaded.model.training, loaded.model.vocab_size
        (True, False, 300)
        >>> loaded.config.model.encoder_attention, next(loaded.model.parameters()).device.type
        ('csan2d', 'cpu')
    """
    folder = find_model_dir(Path(path))
    meta = read_model_meta(folder)
    cfg = config_from_dict(meta["config"])
    model = build_model(cfg.model, int(meta["vocab_size"]))
    load_weights(model, folder / "model.safetensors")
    spm_bytes = read_spm(folder)
    model.to(device).eval()
    return LoadedModel(model, cfg, spm_bytes, folder, meta)


class Translator:
    """A loaded model with its subword model and decoding settings (``config.decode``).

    :meth:`translate` takes lines of text and returns one translation per line, in order; beam size,
    length penalty and batch size default to the model's own settings.

    Example (an untrained tiny model in a run folder's ``model/``: its translations are noise):
        >>> import tempfile
        >>> from csan.toy import toy_model
        >>> run = Path(tempfile.mkdtemp())
        >>> _ = toy_model(run / "model")
        >>> translator = Translator.from_dir(run)
        >>> translator.loaded.folder.name, translator.config.decode.beam, translator.device
        ('model', 2, device(type='cpu'))
        >>> hyps = translator.translate(["ein Hund läuft .", "", "ein Hund ."], beam=1)
        >>> len(hyps), hyps[1]  # one line out per line in, in order; an empty line stays empty
        (3, '')
    """

    def __init__(self, loaded: LoadedModel, *, device: str | torch.device = "cpu") -> None:
        self.loaded = loaded
        self.model = loaded.model
        self.config = loaded.config
        self.spm = SubwordModel.from_bytes(loaded.spm_bytes)
        self.device = torch.device(device)

    @classmethod
    def from_dir(
        cls, path: str | os.PathLike[str], *, device: str | torch.device = "cpu"
    ) -> Translator:
        """The translator of a model folder (or run folder), on ``device``."""
        return cls(load_model(path, device=device), device=device)

    def translate(
        self,
        lines: Sequence[str],
        *,
        beam: int | None = None,
        lenpen: float | None = None,
        max_tokens: int | None = None,
        progress: bool = False,
    ) -> list[str]:
        """Translate ``lines`` (beam 1 is greedy search); ``None`` takes the model's setting."""
        dc = self.config.decode
        return translate_lines(
            self.model,
            self.spm,
            lines,
            beam=dc.beam if beam is None else beam,
            lenpen=dc.lenpen if lenpen is None else lenpen,
            max_tokens=dc.max_tokens if max_tokens is None else max_tokens,
            max_len_a=dc.max_len_a,
            max_len_b=dc.max_len_b,
            device=self.device,
            progress=progress,
        )
