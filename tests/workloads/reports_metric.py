"""Reports its own throughput through perfstack.report_metric, and steps through perfstack.step."""

import time

import perfstack

if __name__ == "__main__":
    start = time.perf_counter()
    total = 0
    for _ in range(5):
        total += sum(range(50_000))
        perfstack.step()
    perfstack.report_metric("throughput", 5 / (time.perf_counter() - start), "steps/s")
    perfstack.report_metric("not_a_number", float("nan"), "x")
