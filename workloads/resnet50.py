"""ResNet-50 (bottleneck blocks, plain torch) training on synthetic images; --image-size 224 for the real size.

    python workloads/resnet50.py [--batch-size N --num-batches N --forward-only --dtype bfloat16 ...]
"""

import harness

if __name__ == "__main__":
    harness.main(default_model="resnet50")
