"""ResNet-50 (bottleneck blocks, plain torch) training on synthetic images.

    python workloads/resnet50.py [--image-size 224 --batch-size N --num-batches N --forward-only]
"""

import harness

if __name__ == "__main__":
    harness.main(default_model="resnet50")
