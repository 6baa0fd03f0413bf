"""Train a tiny model with DistributedDataParallel on CPU, logging every rank with runlines.

Run: torchrun --nproc_per_node=2 examples/torchrun_train.py [--steps N] [--out DIR] [--name NAME]

Each rank writes its own log (rank 0 `<name>.jsonl`, rank R `<name>.rank<R>.jsonl`) and only
rank 0 prints to stdout; `runlines show <name>` reads them back as one run.
"""

from __future__ import annotations

import argparse

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel

from runlines import Run


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=20, help="optimizer steps (default 20)")
    parser.add_argument("--eval-every", type=int, default=10, help="steps between evaluations")
    parser.add_argument("--lr", type=float, default=0.05)
    parser.add_argument("--out", default="runs", help="directory of the logs (default runs/)")
    parser.add_argument("--name", default="ddp-tiny", help="run name (default ddp-tiny)")
    return parser.parse_args(argv)


def make_data(rank: int, size: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Return this rank's shard of a synthetic regression set: y = sum(x) + noise."""
    generator = torch.Generator().manual_seed(1000 + rank)
    x = torch.randn(size, 8, generator=generator)
    return x, x.sum(dim=1, keepdim=True) + 0.1 * torch.randn(size, 1, generator=generator)


def evaluate(model: nn.Module, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """Return the validation loss averaged over every rank."""
    with torch.no_grad():
        loss = nn.functional.mse_loss(model(x), y)
    dist.all_reduce(loss)
    return loss / dist.get_world_size()


def train(args: argparse.Namespace) -> None:
    """Train on this rank's shard, logging through a Run opened on every rank."""
    rank = dist.get_rank()
    torch.manual_seed(0)  # the same initial weights on every rank
    model = DistributedDataParallel(nn.Linear(8, 1))
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr)
    x, y = make_data(rank, 256)
    val_x, val_y = make_data(rank + 100, 64)
    config = {"lr": args.lr, "steps": args.steps, "batch_size": 16 * dist.get_world_size()}

    # Run reads RANK and WORLD_SIZE from torchrun's environment.
    with Run(args.name, args.out, config=config) as run:
        run.sample("train_step", every=5)  # per-batch records: keep 1 in 5
        for step in range(1, args.steps + 1):
            batch = torch.randint(0, len(x), (16,))
            loss = nn.functional.mse_loss(model(x[batch]), y[batch])
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            # A tensor, not loss.item(): it is read only if this record is kept.
            run.log("train_step", step=step, loss=loss.detach(), lr=args.lr)
            if step % args.eval_every == 0 or step == args.steps:
                with run.span("eval", step=step):
                    val_loss = evaluate(model, val_x, val_y)
                run.log("eval", step=step, loss=val_loss, split="val")


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    dist.init_process_group("gloo")  # CPU; use "nccl" on GPUs
    try:
        train(args)
    finally:
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
