"""Two ranks on gloo; rank 1 does five times the work per step, so rank 0 waits for it in
every all_reduce: rank 1 is the straggler."""

import os

import torch
import torch.distributed as dist

import perfstack

if __name__ == "__main__":
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    torch.set_num_threads(1)
    a = torch.randn(256, 256)
    grad = torch.zeros(4096)
    for _ in range(12):
        for _ in range(40 if rank == 1 else 8):
            a = torch.tanh(a @ a)
        dist.all_reduce(grad)
        perfstack.step()
    dist.destroy_process_group()
    print(f"rank {rank} of {os.environ['WORLD_SIZE']} done")
