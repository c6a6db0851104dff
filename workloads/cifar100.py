"""A CIFAR-100-style CNN training loop; runs under torchrun with DDP (gloo on CPU).

    python workloads/cifar100.py --num-batches 20
    torchrun --nproc-per-node 2 workloads/cifar100.py
"""

import harness

if __name__ == "__main__":
    harness.main(default_model="cifar100")
