"""A deepwave-style 3-D acoustic wave propagation (ReplicationPad3d + Laplacian) with the velocity gradient.

    python workloads/deepwave.py [--batch-size N --num-batches N --forward-only --dtype bfloat16 ...]
"""

import harness

if __name__ == "__main__":
    harness.main(default_model="deepwave")
