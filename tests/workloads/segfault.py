"""Dies of SIGSEGV inside a named function, as a broken native extension would."""

import ctypes


def call_into_broken_extension() -> None:
    ctypes.string_at(0)  # reads address 0: SIGSEGV


if __name__ == "__main__":
    call_into_broken_extension()
