"""perfstack's built-in backends.

Each module here is an ordinary perfstack plugin, registered through the ``perfstack``
entry-point group in pyproject.toml exactly as a third-party package would register.
"""
