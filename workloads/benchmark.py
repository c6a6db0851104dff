"""Any model of the harness by name, as DLBS's benchmarks.py: --model resnet50|bert|deepwave|...

    python workloads/benchmark.py --model bert --batch-size 8 --num-batches 10
"""

import harness

if __name__ == "__main__":
    harness.main()
