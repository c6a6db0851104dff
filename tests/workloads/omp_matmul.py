"""Matrix products with torch's intra-op (OpenMP) threads: scales with OMP_NUM_THREADS."""

import time

import torch

import perfstack

if __name__ == "__main__":
    a = torch.randn(1024, 1024)
    a @ a
    start = time.perf_counter()
    for _ in range(25):
        a @ a
    rate = 25 / (time.perf_counter() - start)
    print(f"throughput: {rate:.1f} matmuls/s")
    perfstack.report_metric("throughput", rate, "matmuls/s")
