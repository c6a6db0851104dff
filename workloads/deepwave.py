"""A deepwave-style 3-D wave propagation (ReplicationPad3d, Laplacian) and its velocity gradient.

    python workloads/deepwave.py [--grid N --time-steps N --num-batches N --forward-only ...]
"""

import harness

if __name__ == "__main__":
    harness.main(default_model="deepwave")
