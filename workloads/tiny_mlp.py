"""A small MLP trained on synthetic data: the default demo workload (seconds on 2 CPUs).

    python workloads/tiny_mlp.py --num-batches 200 --batch-size 64 --hidden 512
"""

import harness

if __name__ == "__main__":
    harness.main(default_model="mlp", num_batches=200, hidden=512)
