"""The run folder's contract, shared by the driver (``perfstack.run``), the code inside the
workload's process (``perfstack.inprocess``) and the plugins: its files' names
(``filenames``), the folder and its runs (``rundir``), claiming a folder for one writer
(``claim``), a job's ranks (``ranks``) and what the driver and the bootstrap agree on
(``handshake``). A low floor: it imports only ``perfstack.errors`` and ``perfstack.records``."""
