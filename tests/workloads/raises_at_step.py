"""Works for a few steps, then raises the way a shape bug does (no torch: quick to start)."""


def step(i: int) -> list[list[int]]:
    rows, inner = (4, 5) if i != 3 else (4, 6)
    if inner != 5:
        raise RuntimeError(f"mat1 and mat2 shapes cannot be multiplied ({rows}x{inner} and 5x7)")
    return [[r * c for c in range(7)] for r in range(rows)]


if __name__ == "__main__":
    for i in range(10):
        step(i)
