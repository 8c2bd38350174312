"""PyTorch's own distributed engine: torchrun sets the environment, DDP syncs gradients.

``torchrun --nproc_per_node N -m csan train ...`` starts N processes; each reads its shard of the
batches; rank 0 alone writes checkpoints and logs. gloo on CPU, NCCL on CUDA.

Every collective here must be called by all ranks in the same order, or the run hangs. The trainer
keeps to three per optimizer step, on every rank: the token count and the loss sums
(:func:`all_reduce_sum`), DDP's gradient all-reduce, and the stop vote (:func:`any_rank`) that makes
a signal or a time limit seen by one rank stop all of them at the same step. Rank 0's validation and
checkpoint writing use no collective; the other ranks wait for it in the next step's first
all-reduce, which is why the process group gets a long :data:`COLLECTIVE_TIMEOUT`.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from datetime import timedelta

import torch
import torch.distributed as dist

from csan.errors import CsanError

__all__ = [
    "COLLECTIVE_TIMEOUT",
    "DistInfo",
    "all_reduce_sum",
    "any_rank",
    "barrier",
    "init_distributed",
    "same_on_all_ranks",
    "shutdown",
]

COLLECTIVE_TIMEOUT = timedelta(minutes=60)
"""How long a rank waits in a collective: longer than rank 0's longest validation or final test.

(NCCL's default is 10 minutes, less than a BLEU validation of a large set can take.)"""


@dataclass(frozen=True)
class DistInfo:
    """Where this process stands: rank, world size, and its device.

    Example:
        >>> DistInfo().is_main, DistInfo().enabled  # one process, as without torchrun
        (True, False)
        >>> second = DistInfo(rank=1, world_size=2, local_rank=1)
        >>> second.is_main, second.enabled
        (False, True)
    """

    rank: int = 0
    world_size: int = 1
    local_rank: int = 0

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    @property
    def enabled(self) -> bool:
        return self.world_size > 1


def distributed_env() -> tuple[int, int, int]:
    """``(WORLD_SIZE, RANK, LOCAL_RANK)`` as torchrun sets them; a CsanError names a missing or
    bad one (checked before any work).

    Example:
        >>> distributed_env() if "WORLD_SIZE" not in os.environ else (1, 0, 0)
        (1, 0, 0)
    """
    values = {}
    for name, default in (("WORLD_SIZE", "1"), ("RANK", None), ("LOCAL_RANK", "0")):
        text = os.environ.get(name, default)
        if text is None:
            values[name] = None
            continue
        try:
            values[name] = int(text)
        except ValueError:
            raise CsanError(f"environment {name}={text!r}: expected a whole number") from None
    world, rank, local = values["WORLD_SIZE"], values["RANK"], values["LOCAL_RANK"]
    if world < 1:
        raise CsanError(f"environment WORLD_SIZE={world}: must be at least 1")
    if world == 1:
        return 1, 0, 0
    if rank is None:
        raise CsanError(
            f"environment WORLD_SIZE={world} without RANK: start the processes with torchrun"
        )
    if not 0 <= rank < world:
        raise CsanError(f"environment RANK={rank}: must be in 0..{world - 1} (WORLD_SIZE={world})")
    return world, rank, local


def init_distributed(device: torch.device) -> DistInfo:
    """Join the process group torchrun describes (no-op for a single process).

    Example (outside torchrun):
        >>> info = init_distributed(torch.device("cpu"))
        >>> info.world_size, info.is_main, info.enabled
        (1, True, False)
    """
    world, rank, local = distributed_env()
    if world <= 1:
        return DistInfo()
    if not dist.is_initialized():
        backend = "nccl" if device.type == "cuda" else "gloo"
        dist.init_process_group(backend=backend, timeout=COLLECTIVE_TIMEOUT)
    return DistInfo(rank=rank, world_size=world, local_rank=local)


def barrier(info: DistInfo) -> None:
    """Wait until every rank has reached this call (a no-op for a single process).

    Example (one process, as outside torchrun: no process group, nothing to wait for):
        >>> info = DistInfo()
        >>> barrier(info)
        >>> info.enabled, dist.is_initialized()
        (False, False)
    """
    if info.enabled:
        dist.barrier()


def _device() -> torch.device:
    """Where collective tensors live: NCCL only moves CUDA tensors."""
    if dist.get_backend() == "nccl":
        return torch.device("cuda", torch.cuda.current_device())
    return torch.device("cpu")


def all_reduce_sum(values: list[float], info: DistInfo) -> list[float]:
    """Sum a few numbers over ranks (for logging and token counts).

    Example (a single process: the numbers themselves):
        >>> all_reduce_sum([3.0, 4.0], DistInfo())
        [3.0, 4.0]
    """
    if not info.enabled:
        return values
    t = torch.tensor(values, dtype=torch.float64, device=_device())
    dist.all_reduce(t)
    return t.tolist()


def any_rank(flags: list[float], info: DistInfo) -> list[float]:
    """The element-wise maximum of ``flags`` over ranks: what one rank raises, all see.

    Example:
        >>> any_rank([0.0, 1.0], DistInfo())
        [0.0, 1.0]
    """
    if not info.enabled:
        return flags
    t = torch.tensor(flags, dtype=torch.float64, device=_device())
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    return t.tolist()


def same_on_all_ranks(data: bytes, info: DistInfo) -> bool:
    """Whether every rank holds the same ``data`` (compares SHA-256 digests; True when alone).

    Example:
        >>> same_on_all_ranks(b"spm model bytes", DistInfo())
        True
    """
    if not info.enabled:
        return True
    import hashlib

    digest = torch.tensor(list(hashlib.sha256(data).digest()), dtype=torch.float64)
    both = torch.cat([digest, -digest]).to(_device())
    dist.all_reduce(both, op=dist.ReduceOp.MAX)  # max and -min of every byte
    return bool(torch.equal(both[:32].cpu(), -both[32:].cpu()))


def shutdown(info: DistInfo) -> None:
    """Leave the process group at the end of a run (a no-op for a single process, or when no group
    was joined), so that the next run in this process starts afresh.

    Example (safe to call whatever :func:`init_distributed` did):
        >>> shutdown(DistInfo())
        >>> shutdown(DistInfo(rank=1, world_size=2, local_rank=1))  # no group was joined here
        >>> dist.is_initialized()
        False
    """
    if info.enabled and dist.is_initialized():
        dist.destroy_process_group()
