"""PyTorch's own distributed engine: torchrun sets the environment, DDP syncs gradients.

``torchrun --nproc_per_node N -m csan train ...`` starts N processes; each reads its shard of the
batches; rank 0 alone writes checkpoints and logs. gloo on CPU, NCCL on CUDA.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import torch
import torch.distributed as dist

__all__ = ["DistInfo", "barrier", "init_distributed", "shutdown"]


@dataclass(frozen=True)
class DistInfo:
    """Where this process stands: rank, world size, and its device."""

    rank: int = 0
    world_size: int = 1
    local_rank: int = 0

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    @property
    def enabled(self) -> bool:
        return self.world_size > 1


def init_distributed(device: torch.device) -> DistInfo:
    """Join the process group torchrun describes (no-op for a single process)."""
    world = int(os.environ.get("WORLD_SIZE", "1"))
    if world <= 1:
        return DistInfo()
    rank = int(os.environ["RANK"])
    local = int(os.environ.get("LOCAL_RANK", "0"))
    if not dist.is_initialized():
        backend = "nccl" if device.type == "cuda" else "gloo"
        dist.init_process_group(backend=backend)
    return DistInfo(rank=rank, world_size=world, local_rank=local)


def barrier(info: DistInfo) -> None:
    if info.enabled:
        dist.barrier()


def all_reduce_sum(values: list[float], info: DistInfo) -> list[float]:
    """Sum a few numbers over ranks (for logging and token counts)."""
    if not info.enabled:
        return values
    t = torch.tensor(values, dtype=torch.float64)
    dist.all_reduce(t)
    return t.tolist()


def shutdown(info: DistInfo) -> None:
    if info.enabled and dist.is_initialized():
        dist.destroy_process_group()
