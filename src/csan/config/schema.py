"""The configuration's dataclasses: one per component, a default and a comment per field."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Literal

__all__ = ["Config", "ConvS2SConfig", "DataConfig", "DecodeConfig", "ModelConfig", "TrainConfig"]


@dataclass
class ConvS2SConfig:
    """ConvS2S (Gehring et al. 2017) sizes; used when ``model.arch`` is ``convs2s``.

    Example:
        >>> sizes = ConvS2SConfig(encoder_layers=4, decoder_layers=3)
        >>> m = ModelConfig(arch="convs2s", convs2s=sizes)
        >>> m.convs2s.encoder_layers, m.convs2s.decoder_layers, m.convs2s.kernel
        (4, 3, 3)
    """

    embed_dim: int = 256  # token and position embedding size
    channels: int = 256  # convolution channels (hidden size of the blocks)
    encoder_layers: int = 6  # encoder convolution blocks
    decoder_layers: int = 6  # decoder convolution blocks
    kernel: int = 3  # convolution width (odd in the encoder; causal in the decoder)


@dataclass
class ModelConfig:
    """The translation model. Attention variants are registry names (``csan attention list``).

    Example:
        >>> m = ModelConfig(d_model=64, encoder_attention="csan1d@0-1")
        >>> m.d_model // m.heads, m.encoder_attention, m.decoder_attention
        (16, 'csan1d@0-1', 'vanilla')
    """

    arch: str = "transformer"  # "transformer" or "convs2s"
    d_model: int = 256  # hidden size
    heads: int = 4  # attention heads
    ffn_dim: int = 1024  # feed-forward inner size
    encoder_layers: int = 3  # Transformer encoder layers
    decoder_layers: int = 3  # Transformer decoder layers
    dropout: float = 0.3  # dropout on embeddings, sublayer outputs
    attention_dropout: float = 0.0  # dropout on attention weights
    activation_dropout: float = 0.0  # dropout inside the feed-forward block
    pre_norm: bool = True  # layer norm before each sublayer (False: after, as in the paper)
    share_embeddings: bool = True  # tie source, target and output embeddings (joint vocabulary)
    # The softmax's pieces: "full", the whole joint vocabulary (as fairseq's --joined-dictionary);
    # "target", only those the training targets use, plus </s> and <unk> (the Transformer; set from
    # the data at the start of a run and saved with the weights): a smaller output product; "auto",
    # "target" where a run computes in float32 and "full" under bf16 autocast (the run saves which:
    # csan.machine.choose_output_vocab).
    output_vocab: str = "full"
    max_positions: int = 256  # longest sequence (subword tokens + EOS) the model accepts
    # Per-layer self-attention: one name for every layer, a comma list (one per layer), or
    # "name@0-2" (those layers, the others vanilla). See csan.attention.available().
    encoder_attention: str = "vanilla"
    decoder_attention: str = "vanilla"
    cross_attention: str = "vanilla"  # encoder-decoder attention variant
    attention_options: dict[str, dict[str, Any]] = field(default_factory=dict)  # per variant name
    convs2s: ConvS2SConfig = field(default_factory=ConvS2SConfig)


@dataclass
class DataConfig:
    """Where the parallel text comes from and how it is cut into subwords.

    Example:
        >>> d = DataConfig(src_lang="de", tgt_lang="en", train_subset=1000)
        >>> d.dataset, d.test_split, d.vocab_size, d.train_subset
        ('multi30k', 'test2016', 8000, 1000)
    """

    dataset: str = "multi30k"  # registry name (csan.data.datasets)
    data_dir: str | None = None  # folder with <split>.<lang> files; default $CSAN_DATA/<dataset>
    src_lang: str = "en"
    tgt_lang: str = "de"
    train_split: str = "train"
    valid_split: str = "valid"
    test_split: str = "test2016"
    vocab_size: int = 8000  # joint SentencePiece BPE vocabulary
    max_len: int = 128  # training pairs with a side longer than this (subwords + EOS) are dropped
    # BPE-dropout (Provilkov et al., 2020), training only: each epoch cuts the training text into
    # subwords afresh, every merge skipped with this probability (SentencePiece's sampling), and is
    # batched by those lengths; 0: off. Sequences get longer (on Multi30k 1.2x at 0.05, 1.4x at
    # 0.1); validation, test and translation keep the deterministic segmentation.
    bpe_dropout: float = 0.0
    train_subset: int | None = None  # use only the first N training pairs (None: all)
    valid_subset: int | None = None  # use only the first N validation pairs (None: all)
    same_language: bool = False  # allow src_lang == tgt_lang (paraphrase, denoising); else refused
    # files by path prefix, as fairseq's --trainpref: <prefix>.<src_lang> and <prefix>.<tgt_lang>
    # (default: <data_dir>/<split>); test_prefix takes several, comma-separated, each scored
    train_prefix: str | None = None
    valid_prefix: str | None = None
    test_prefix: str | None = None


@dataclass
class TrainConfig:
    """The training recipe (label-smoothed cross-entropy, Adam, inverse-sqrt warmup).

    Example:
        >>> t = TrainConfig(lr=5e-4, max_steps=1000)
        >>> t.schedule, t.adam_betas, t.max_epochs
        ('inverse_sqrt', (0.9, 0.98), None)
    """

    seed: int = 1
    max_tokens: int = 4096  # target tokens per batch and process
    update_freq: int = 1  # gradient accumulation: batches per optimizer step
    lr: float = 1e-3  # peak learning rate ("inverse_sqrt", "budget")
    # "inverse_sqrt" (peak lr after `warmup` steps), "noam" (d_model^-0.5 ...), or "budget": warmup,
    # decay and cooldown as fractions of the run's budget (max_minutes, max_steps or max_epochs), so a
    # slow machine gets the whole schedule too (csan.training.schedule.budget_schedule)
    schedule: str = "inverse_sqrt"
    warmup: int = 1000  # warmup steps ("inverse_sqrt", "noam")
    warmup_fraction: float = 0.25  # "budget": warmup over this fraction of the budget
    cooldown_fraction: float = (
        0.2  # "budget": lr to 0 over the last fraction; averaged (average_last)
    )
    adam_betas: tuple[float, float] = (0.9, 0.98)
    adam_eps: float = 1e-9
    weight_decay: float = 0.0
    clip_norm: float | None = None  # gradient clipping by global norm (None: off)
    label_smoothing: float = 0.1
    max_epochs: int | None = None  # stop after this many epochs (None: no limit)
    max_steps: int | None = None  # stop after this many optimizer steps (None: no limit)
    max_minutes: float | None = None  # stop after this much wall time (None: no limit)
    validate_every: int | None = None  # validate every N steps (None: at the end of each epoch)
    valid_bleu: bool = True  # greedy-decode the validation set for BLEU at each validation
    checkpoint_every: int | None = None  # steps between checkpoints (None: at each validation)
    checkpoint_minutes: float | None = 10.0  # also checkpoint after this many minutes (None: off)
    keep_last: int = 5  # step checkpoints kept (the best is kept as well)
    # at the end, average the last N checkpoints into the final model (1: the last alone); with
    # schedule "budget", N checkpoints evenly spaced over the cooldown, and the validations' between
    average_last: int = 1
    log_every: int = 50  # steps between metric lines in metrics.jsonl
    threads: int | None = None  # torch intra-op threads (None: torch's default)
    bf16: bool = True  # bf16 autocast on CUDA (ignored on CPU: see cpu_bf16)
    # bf16 autocast on CPU: "auto" where the CPU computes bf16 natively (AVX512-BF16, AMX), float32
    # elsewhere (emulated bf16 is 40-60x slower); true/false to force (csan.machine.choose_runtime)
    cpu_bf16: bool | Literal["auto"] = "auto"
    compile: bool | Literal["auto"] = "auto"  # torch.compile: "auto" where it pays (see cpu_bf16)
    max_bad_steps: int = 5  # consecutive NaN/inf losses before training stops
    evaluate_test: bool = True  # translate and score the test split when training ends
    device: str = "auto"  # "auto", "cpu", "cuda", "cuda:1", ...


@dataclass
class DecodeConfig:
    """Decoding defaults (beam search with the GNMT length penalty).

    Example:
        >>> d = DecodeConfig(beam=5)
        >>> d.beam, int(d.max_len_a * 20 + d.max_len_b)  # the output limit of a 20-token source
        (5, 34)
    """

    beam: int = 4
    lenpen: float = 0.6  # alpha in ((5 + |y|) / 6) ** alpha
    max_len_a: float = 1.2  # output length limit: a * source length + b
    max_len_b: int = 10
    max_tokens: int = 6000  # source tokens per decoding batch


@dataclass
class Config:
    """A whole run.

    Example:
        >>> cfg = Config(train=TrainConfig(lr=5e-4))
        >>> cfg.model.arch, cfg.to_dict()["train"]["lr"], cfg.to_dict()["train"]["adam_betas"]
        ('transformer', 0.0005, [0.9, 0.98])
    """

    model: ModelConfig = field(default_factory=ModelConfig)
    data: DataConfig = field(default_factory=DataConfig)
    train: TrainConfig = field(default_factory=TrainConfig)
    decode: DecodeConfig = field(default_factory=DecodeConfig)
    # Settings for a run whose products are float32 (no bf16 autocast: ``train.cpu_bf16`` false, or
    # ``auto`` on a CPU without native bf16), laid out as the sections above, e.g. ``{"model":
    # {"encoder_attention": "vanilla"}}``. A run merges them over the rest once it has chosen its
    # precision, and saves the result with the section emptied
    # (:func:`csan.training.prepare.settle_float32`). Empty: none.
    float32: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """Plain nested dict (YAML/JSON friendly)."""
        d = asdict(self)
        d["train"]["adam_betas"] = list(d["train"]["adam_betas"])
        return d
