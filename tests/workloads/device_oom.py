"""Dies as a CUDA out-of-memory dies, on any machine: ``forward`` raises the error torch's
caching allocator raises, with the message a real one wrote (two real messages below, one
whose allocator cache was the problem, one whose tensors were). The truth a report must
agree with: out of device memory at ``forward``'s raising line, and the fix that fits.

    python device_oom.py [tensors|cache]
"""

import sys

import torch

#: Real messages (public bug reports): the tensors filled the device...
TENSORS = ("CUDA out of memory. Tried to allocate 19.68 GiB. GPU 0 has a total capacity of "
           "23.68 GiB of which 11.88 GiB is free. Including non-PyTorch memory, this process "
           "has 11.79 GiB memory in use. Of the allocated memory 11.44 GiB is allocated by "
           "PyTorch, and 43.59 MiB is reserved by PyTorch but unallocated. If reserved but "
           "unallocated memory is large try setting PYTORCH_CUDA_ALLOC_CONF=expandable_segments"
           ":True to avoid fragmentation.  See documentation for Memory Management  "
           "(https://pytorch.org/docs/stable/notes/cuda.html#environment-variables)")
#: ...and the allocator's cache held more than was asked.
CACHE = ("CUDA out of memory. Tried to allocate 764.00 MiB. GPU 0 has a total capacity of "
         "47.37 GiB of which 442.88 MiB is free. Of the allocated memory 42.40 GiB is "
         "allocated by PyTorch, and 3.24 GiB is reserved by PyTorch but unallocated. If "
         "reserved but unallocated memory is large try setting PYTORCH_CUDA_ALLOC_CONF="
         "expandable_segments:True to avoid fragmentation.")


def forward(x: torch.Tensor, message: str) -> torch.Tensor:
    raise torch.OutOfMemoryError(message)


if __name__ == "__main__":
    forward(torch.ones(2), CACHE if sys.argv[1:] == ["cache"] else TENSORS)
