"""Sessions compared: ``ab`` (two versions of a workload, their runs interleaved) and
``sweep`` (one session per setting of environment variables)."""
