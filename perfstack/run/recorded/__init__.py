"""The reading of profiles recorded elsewhere (``perfstack analyze``): the files found and
claimed by backends (``ingest``), read unit by unit on an executor (``executors``: this
process, a local pool, a Dask cluster) and reduced into one report (``reduce``), while
``watch`` asks the executor whether its workers still answer."""
