"""A BERT-style encoder (token, position and segment embeddings) trained as a masked LM.

    python workloads/bert.py [--batch-size N --num-batches N --forward-only --dtype bfloat16 ...]
"""

import harness

if __name__ == "__main__":
    harness.main(default_model="bert")
