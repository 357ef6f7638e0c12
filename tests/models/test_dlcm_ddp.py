"""DLCM's global parser under real data parallelism: two gloo processes, each with its own batch; the
loss value each rank computes equals the ratio loss of the two batches pooled, the gradient stays local."""
from __future__ import annotations

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from models.dlcm import all_reduce_parser_stats, compression_loss, ratio_loss

R = 4.0


def batch(rank: int) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(rank)
    p = torch.rand(3, 10, generator=g)
    return p, (torch.rand(3, 10, generator=g) < 0.3).float()


def _rank(rank: int, store: str, out: str) -> None:
    dist.init_process_group("gloo", init_method=f"file://{store}", rank=rank, world_size=2)
    try:
        p, b = batch(rank)
        p.requires_grad_()
        loss = compression_loss(p, b, R, "global", sync=all_reduce_parser_stats)
        loss.backward()
        torch.save({"loss": loss.detach(), "grad": p.grad}, f"{out}.{rank}")
    finally:
        dist.destroy_process_group()


@pytest.mark.slow
def test_global_parser_statistics_are_the_pooled_batches_across_two_processes(tmp_path):
    mp.spawn(_rank, args=(str(tmp_path / "store"), str(tmp_path / "out")), nprocs=2, join=True)
    (p0, b0), (p1, b1) = batch(0), batch(1)
    pooled = ratio_loss(torch.cat([b0, b1]).mean(), torch.cat([p0, p1]).mean(), R)
    results = [torch.load(tmp_path / f"out.{rank}") for rank in (0, 1)]
    for rank, (p, _b) in enumerate(((p0, b0), (p1, b1))):
        torch.testing.assert_close(results[rank]["loss"], pooled)
        # gradient: through the local mean of p only, at the global F (the value uses the global G)
        local = p.clone().requires_grad_()
        f = torch.cat([b0, b1]).mean()
        g = local.mean() + (torch.cat([p0, p1]).mean() - local.mean()).detach()
        ratio_loss(f, g, R).backward()
        torch.testing.assert_close(results[rank]["grad"], local.grad)
