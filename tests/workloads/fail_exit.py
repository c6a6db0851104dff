"""Raises an exception: exits with status 1 and a Python traceback on stderr."""


def load_config() -> None:
    raise RuntimeError("config file missing")


if __name__ == "__main__":
    load_config()
