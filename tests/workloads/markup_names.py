"""Names full of markup: a torch record_function label and a Python function compiled from a
'file' whose name is HTML. Every renderer must print them as text, never as markup."""

import torch

EVIL = "<script>alert('x')</script> | **bold** [link](http://e)"

namespace: dict[str, object] = {}
exec(compile("def spin(n):\n    t = 0\n    for i in range(n):\n        t += i\n    return t\n",
             EVIL, "exec"), namespace)
spin = namespace["spin"]

if __name__ == "__main__":
    a = torch.randn(64, 64)
    for _ in range(20):
        with torch.profiler.record_function(EVIL):
            a = torch.tanh(a @ a)
        spin(200_000)  # type: ignore[operator]
