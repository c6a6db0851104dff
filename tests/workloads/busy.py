"""A short pure-Python CPU loop (about 0.2 s)."""


def spin(n: int) -> int:
    total = 0
    for i in range(n):
        total += i * i
    return total


if __name__ == "__main__":
    spin(2_000_000)
