"""What runs inside the workload's process: the bootstrap that starts the script
(``python -m perfstack.inprocess.bootstrap``), the step counting and the workload's own
figures (``steps``; ``perfstack.step`` and ``perfstack.report_metric``), and the hook that
reaches into a library once the workload imports it (``afterimport``). Standard library
only, and nothing here imports the rest of perfstack but ``perfstack.runfolder.filenames``."""
