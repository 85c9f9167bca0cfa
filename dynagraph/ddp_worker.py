"""The worker that lesson 12 launches on several processes: DDP, each rank writing what it saw.

Run it with PyTorch's launcher, one process per rank::

    python -m torch.distributed.run --standalone --nproc-per-node=2 -m dynagraph.ddp_worker OUT

Each rank trains the same small MLP on its own half of every batch and writes, into the
folder ``OUT``: ``rank{r}.json`` (gradients, DDP's buckets, counts, errors: plain numbers
and names) and ``rank{r}_{name}.json`` (backward replays, for :func:`dynagraph.load_view`).
The lesson reads them back. :func:`make_model` and :func:`batch` are the same in the
notebook, so it can compute the gradient of the whole batch in one process.

With ``--backend nccl`` each rank uses the GPU ``cuda:LOCAL_RANK`` (one GPU per rank).
"""

from __future__ import annotations

import argparse
import json
import os
import time
from collections import Counter
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP

from . import _torch
from .backward import trace_backward
from .saving import save_view

__all__ = ["BUCKET_CAP_MB", "Branchy", "batch", "bucket_names", "main", "make_model"]

BUCKET_CAP_MB = 0.001  # 1,048 bytes: the small MLP's 8 parameters go into three buckets
ROWS = 4  # rows of each rank's part of a batch


def make_model() -> nn.Sequential:
    """The lesson's MLP, with the same weights in every process (seeded)."""
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(8, 16), nn.Tanh(), nn.Linear(16, 16), nn.Tanh(),
                         nn.Linear(16, 16), nn.Tanh(), nn.Linear(16, 1))


def batch(step: int, rank: int, world: int = 2, sign: float = 0.0) -> tuple[torch.Tensor, torch.Tensor]:
    """Rank ``rank``'s rows of batch ``step``: the whole batch (``world * ROWS`` rows) is
    the same in every process, and each rank takes its own slice. ``sign`` (``+1``/``-1``)
    sets the sign of the first input column, which :class:`Branchy` branches on."""
    g = torch.Generator().manual_seed(100 + step)
    x, y = torch.randn(world * ROWS, 8, generator=g), torch.randn(world * ROWS, 1, generator=g)
    if sign:
        x[:, 0] = sign * x[:, 0].abs()
    rows = slice(rank * ROWS, (rank + 1) * ROWS)
    return x[rows], y[rows]


class Branchy(nn.Module):
    """A trunk and two heads; the data picks the head (the sign of the first input column)."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.trunk, self.up, self.down = nn.Linear(8, 16), nn.Linear(16, 1), nn.Linear(16, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = torch.tanh(self.trunk(x))
        return self.up(h) if x[:, 0].mean() > 0 else self.down(h)  # a branch that depends on the data


def bucket_names(model: DDP) -> list[list[str]]:
    """The parameters of each of DDP's current buckets, by name, from DDP's own reducer."""
    names = {id(p): n for n, p in model.named_parameters()}
    buckets = _torch.ddp_buckets(model)
    return [[names[id(p)] for p in b.parameters()] for b in sorted(buckets, key=lambda b: b.index())]


def _grads(model: nn.Module) -> dict[str, list]:
    return {n: p.grad.detach().cpu().tolist() for n, p in model.named_parameters() if p.grad is not None}


def _loss(model: nn.Module, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    return (model(x) - y).pow(2).mean()


def _buckets(out: Path, rank: int, device: torch.device, seen: dict[str, Any]) -> None:
    """Three steps on a traced model beside an untraced twin: gradients, buckets, launches."""
    traced = DDP(make_model().to(device), bucket_cap_mb=BUCKET_CAP_MB)
    plain = DDP(make_model().to(device), bucket_cap_mb=BUCKET_CAP_MB)
    seen.update(grads=[], plain_grads=[], reducer_buckets=[], traced_steps=[1, 2])
    for step in (1, 2, 3):
        x, y = (t.to(device) for t in batch(step, rank, seen["world"]))
        loss = _loss(traced, x, y)
        if step in seen["traced_steps"]:  # the third step runs with the hook left behind, untraced
            with trace_backward(loss, params=traced) as bt:
                loss.backward()
            save_view(bt, out / f"rank{rank}_step{step}.json")
        else:
            loss.backward()
        _loss(plain, x, y).backward()
        seen["grads"].append(_grads(traced))
        seen["plain_grads"].append(_grads(plain))
        seen["reducer_buckets"].append(bucket_names(traced))
        for m in (traced, plain):
            m.zero_grad(set_to_none=True)


def _no_sync(out: Path, rank: int, device: torch.device, seen: dict[str, Any]) -> None:
    """Four micro-batches, the first three under no_sync(): launches counted per backward."""
    model = DDP(make_model().to(device), bucket_cap_mb=BUCKET_CAP_MB)
    launches = []
    for step in range(4):
        x, y = (t.to(device) for t in batch(10 + step, rank, seen["world"]))
        sync = step == 3
        ctx = model.no_sync() if not sync else _Null()
        with ctx:
            loss = _loss(model, x, y)
            with trace_backward(loss, params=model) as bt:
                loss.backward()
        launches.append(len(bt.launches))
    seen.update(no_sync_launches=launches, no_sync_grads=_grads(model))
    late = DDP(make_model().to(device), bucket_cap_mb=BUCKET_CAP_MB)  # no_sync() around forward only
    with late.no_sync():
        loss = _loss(late, *(t.to(device) for t in batch(10, rank, seen["world"])))
    with trace_backward(loss, params=late) as bt:
        loss.backward()
    seen["no_sync_forward_only_launches"] = len(bt.launches)


class _Null:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> None:
        return None


def _all_reduces(model: nn.Module, x: torch.Tensor, y: torch.Tensor) -> tuple[int, float]:
    """All-reduces one forward and backward ran (from the profiler), and its seconds."""
    from torch.profiler import ProfilerActivity, profile
    start = time.perf_counter()
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        _loss(model, x, y).backward()
    seconds = time.perf_counter() - start
    return Counter(e.name for e in prof.events())["c10d::allreduce_"], seconds


def _unused(rank: int, device: torch.device, seen: dict[str, Any]) -> None:
    """The branch skips a head: the next step fails; find_unused_parameters=True fixes it."""
    model = DDP(Branchy().to(device))
    x, y = (t.to(device) for t in batch(20, rank, seen["world"], sign=1.0))
    _loss(model, x, y).backward()  # the "up" head: "down" gets no gradient
    seen["unused_step1_grads"] = sorted(_grads(model))
    x, y = (t.to(device) for t in batch(21, rank, seen["world"], sign=-1.0))
    try:
        _loss(model, x, y).backward()
        seen["unused_error"] = ""
    except RuntimeError as e:
        seen["unused_error"] = str(e)
    counts = {}  # all-reduces per step: the MLP (every parameter used) without and with the flag
    nets: list[tuple[str, nn.Module, bool]] = [("mlp", make_model(), False),
                                               ("mlp, find_unused", make_model(), True),
                                               ("branchy, find_unused", Branchy(), True)]
    for key, net, find in nets:
        fixed = DDP(net.to(device), find_unused_parameters=find, bucket_cap_mb=BUCKET_CAP_MB)
        runs = []
        for step, sign in ((22, 1.0), (23, -1.0), (24, 1.0), (25, -1.0)):
            x, y = (t.to(device) for t in batch(step, rank, seen["world"], sign=sign))
            all_reduces, seconds = _all_reduces(fixed, x, y)
            rebuilt = bool(_torch.ddp_logging_data(fixed).get("has_rebuilt_buckets", 0))
            runs.append((all_reduces, seconds, len(bucket_names(fixed)), sorted(_grads(fixed)), rebuilt))
            fixed.zero_grad(set_to_none=True)
        counts[key] = {"all_reduces": [r[0] for r in runs], "seconds": [r[1] for r in runs],
                       "buckets": [r[2] for r in runs], "with_grad": [r[3] for r in runs],
                       "rebuilt": [r[4] for r in runs]}
    seen["find_unused"] = counts


def main(argv: list[str] | None = None) -> None:
    """Run every experiment on this rank and write what it saw into ``OUT``."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--backend", default="gloo", choices=["gloo", "nccl"])
    args = parser.parse_args(argv)
    dist.init_process_group(args.backend)
    rank, world = dist.get_rank(), dist.get_world_size()
    device = torch.device(f"cuda:{os.environ.get('LOCAL_RANK', 0)}" if args.backend == "nccl" else "cpu")
    if device.type == "cuda":
        torch.cuda.set_device(device)
    seen: dict[str, Any] = {"rank": rank, "world": world, "backend": args.backend, "device": str(device)}
    try:
        _buckets(args.out, rank, device, seen)
        _no_sync(args.out, rank, device, seen)
        _unused(rank, device, seen)
    finally:
        (args.out / f"rank{rank}.json").write_text(json.dumps(seen))
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
