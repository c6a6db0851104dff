"""Spends three quarters of its time in one pure-Python function and a quarter in another.

Both run the same loop; only the iteration counts differ, 3:1.
"""


def three_quarters(n: int) -> int:
    total = 0
    for i in range(n):
        total += i % 7
    return total


def one_quarter(n: int) -> int:
    total = 0
    for i in range(n):
        total += i % 7
    return total


if __name__ == "__main__":
    for _ in range(60):
        three_quarters(600_000)
        one_quarter(200_000)
