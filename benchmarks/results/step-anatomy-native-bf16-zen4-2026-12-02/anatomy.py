"""Where the main job's compiled bf16 step goes, by kind of work, and how fast its products run.

    CSAN_DATA=../shared/data python benchmarks/results/step-anatomy-native-bf16-zen4-2026-12-02/anatomy.py OUT

The trainer of ``multi30k-small`` as ``csan train`` builds it (here: bf16 autocast + compile), on
the first 30 batches of epoch 1: 20 untimed steps (compilation), then 10 under ``torch.profiler``
with inductor's per-kernel profile on. Its self CPU time is put in groups (matrix products,
attention, inductor's fused kernels, dropout's random bytes, Adam, the gradient norm, the rest).
The floating-point work of the products in those same 10 batches is counted with
``torch.utils.flop_counter.FlopCounterMode`` on the uncompiled model (the same autocast), so the
products' rate inside the step can be set beside standalone bf16 products of the step's shapes
and of one larger shape (attention is left out of the count: FlopCounterMode has no formula for
the CPU flash-attention kernel). Writes ``OUT/anatomy.json`` and prints the tables.
"""

import json
import statistics
import sys
import time
from pathlib import Path

import torch
import torch._inductor.config as inductor_config
from torch.profiler import ProfilerActivity, profile
from torch.utils.flop_counter import FlopCounterMode

inductor_config.cpp.enable_kernel_profile = True  # names each fused kernel in the profile

from csan.bench.train import median_step  # noqa: E402
from csan.machine import machine_info  # noqa: E402
from csan.training.loss import TranslationLoss  # noqa: E402

# the trainer of multi30k-small on its first batches of epoch 1, in a temporary run folder
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "profile-avx2-zen3-2026-11-29"))
from _preset import preset_trainer  # noqa: E402

PRODUCTS = ("mm", "addmm", "bmm", "baddbmm")  # aten ops: the profiler's and the counter's names
GROUPS = [
    ("matrix products (mm, addmm, bmm)", lambda k: k.removeprefix("aten::") in PRODUCTS),
    (
        "attention (flash forward and backward)",
        lambda k: "scaled_dot_product" in k and k.startswith("aten::"),
    ),
    ("inductor's fused kernels", lambda k: k.startswith("graph_")),
    ("dropout's random bytes", lambda k: k in {"aten::random_", "csan::fill_random_bytes_"}),
    ("Adam (fused)", lambda k: k == "aten::_fused_adam_"),
    ("gradient norm", lambda k: k == "aten::linalg_vector_norm"),
]


def main() -> None:
    out = Path(sys.argv[1])
    out.mkdir(parents=True, exist_ok=True)
    with preset_trainer(30, []) as (trainer, groups):
        for g in groups[:20]:
            trainer.train_step(g)
        timed = []
        for g in groups[20:]:  # timed, outside the profiler
            t0 = time.perf_counter()
            trainer.train_step(g)
            timed.append(time.perf_counter() - t0)
        with profile(activities=[ProfilerActivity.CPU]) as prof:
            for g in groups[20:]:
                trainer.train_step(g)
        # the products' floating-point work on the same batches, uncompiled, the same autocast
        eager = TranslationLoss(trainer.model, epsilon=trainer.cfg.train.label_smoothing)
        counter = FlopCounterMode(display=False)
        with counter:
            for (b,) in groups[20:]:
                with trainer.autocast():
                    loss, _, _ = eager(b.src, b.tgt_in, b.tgt_out)
                loss.backward()
        trainer.model.zero_grad(set_to_none=True)
        mode = trainer.runtime.mode
        tokens = sum(g[0].tgt_tokens for g in groups[20:])
    counts = counter.get_flop_counts()["Global"]
    product_flops = sum(v for k, v in counts.items() if str(k).split(".")[-1] in PRODUCTS)

    events = prof.key_averages()
    total = sum(e.self_cpu_time_total for e in events)
    rows = [
        (name, sum(e.self_cpu_time_total for e in events if match(e.key))) for name, match in GROUPS
    ]
    rows.append(("everything else", total - sum(us for _, us in rows)))
    steps = len(groups) - 20
    products_ms = rows[0][1] / 1e3 / steps
    median_ms = 1e3 * statistics.median(timed)

    print(f"mode {mode}; {steps} steps, {tokens:,} target tokens")
    print(
        f"median step (unprofiled) {median_ms:.1f} ms; profiled self CPU time "
        f"{total / 1e3 / steps:.1f} ms a step\n"
    )
    print("| work | ms a step | share |\n|---|---:|---:|")
    for name, us in rows:
        print(f"| {name} | {us / 1e3 / steps:.1f} | {100 * us / total:.1f}% |")
    in_step = product_flops / steps / (products_ms / 1e3) / 1e9
    print(
        f"\nproducts: {product_flops / steps / 1e9:.2f} GFLOP a step in {products_ms:.1f} ms: "
        f"{in_step:.0f} GFLOP/s inside the step"
    )

    bf = torch.bfloat16
    shapes = [
        (1024, 256, 1024),
        (1024, 1024, 256),
        (1024, 256, 256),
        (1024, 256, 8000),
        (8000, 1024, 256),
        (4096, 1024, 4096),
    ]
    print("\n| standalone bf16 product (m, k, n) | ms | GFLOP/s |\n|---|---:|---:|")
    standalone = []
    for m, k, n in shapes:
        a, b = torch.randn(m, k, dtype=bf), torch.randn(k, n, dtype=bf)
        ms = 1e3 * median_step(lambda a=a, b=b: a @ b, warmup=3, repeats=15)
        rate = 2 * m * k * n / (ms / 1e3) / 1e9
        standalone.append({"shape": [m, k, n], "ms": round(ms, 3), "gflop_s": round(rate, 1)})
        print(f"| {m} x {k} @ {k} x {n} | {ms:.3f} | {rate:.0f} |")

    record = {
        "command": " ".join(["python", *sys.argv]),
        "machine": machine_info("cpu", mode=mode),
        "steps": steps,
        "target_tokens": tokens,
        "median_step_ms": round(median_ms, 1),
        "profiled_self_ms_per_step": round(total / 1e3 / steps, 1),
        "groups_ms_per_step": {name: round(us / 1e3 / steps, 2) for name, us in rows},
        "product_gflop_per_step": round(product_flops / steps / 1e9, 3),
        "product_gflop_s_in_step": round(in_step, 1),
        "standalone_bf16_products": standalone,
        "top_ops": [
            {
                "op": e.key,
                "ms_per_step": round(e.self_cpu_time_total / 1e3 / steps, 2),
                "calls_per_step": e.count / steps,
            }
            for e in sorted(events, key=lambda e: -e.self_cpu_time_total)[:40]
        ],
    }
    (out / "anatomy.json").write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
    print(f"\nsaved {out / 'anatomy.json'}")


if __name__ == "__main__":
    main()
