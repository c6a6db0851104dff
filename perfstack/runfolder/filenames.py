"""The names of the files in a run folder: the one place they are spelt.

A leaf: it imports nothing, so the bootstrap (inside the workload's process), the public
``perfstack.report_metric`` and the driver's side (``perfstack.runfolder.rundir``) all take the
names from here. What each file holds is said where it is written.
"""

#: The pointer to the newest run folder, beside the run folders.
LATEST = "latest"
#: The report, in the run folder unless ``-o`` puts it elsewhere.
REPORT_FILE = "report.json"
#: What the driver tells the bootstrap (its folder, in-process hooks, the steps window).
BOOTSTRAP_CONFIG_FILE = "bootstrap.json"
#: The workload's own output, in each run's folder.
STDOUT_FILE = "stdout.log"
STDERR_FILE = "stderr.log"
#: Where the workload's Python stack goes when it crashes or is asked for it.
FAULTHANDLER_FILE = "faulthandler.log"
#: The workload's pid and start, written once it runs.
STARTED_FILE = "workload.json"
#: How many steps the workload marked and each one's time, written at its exit.
STEPS_FILE = "workload-steps.json"
#: Written when the measured window of ``perfstack run --steps`` opens (after the warm-up
#: steps): samplers attach then, and the driver answers with WINDOW_GO_FILE once they have.
WINDOW_FILE = "workload-window.json"
WINDOW_GO_FILE = "workload-window.go"
#: What an in-process hook raised (the workload goes on without it).
HOOK_ERRORS_FILE = "inprocess-errors.log"
#: What the workload process saw: the torch it imported, its threads.
WORKLOAD_ENV_FILE = "workload-env.json"
#: The machine-speed probe timed in the workload's process.
PROBE_FILE = "probe.json"
#: The workload's resident memory at its last high, and where it was taken
#: (perfstack.inprocess.memwatch): what explains an out-of-memory death
MEMWATCH_FILE = "memory-watch.json"
#: What kind of tensor held the host's memory when the script died of a refused allocation
#: (perfstack.inprocess.tensorkinds)
TENSORS_AT_OOM_FILE = "tensors-at-oom.json"
#: ``run --on-demand``: the armed rider's pid and backends (perfstack.inprocess.ondemand)
ONDEMAND_FILE = "ondemand.json"
#: ``perfstack capture``'s request to the armed rider, written whole
CAPTURE_REQUEST_FILE = "capture-request.json"
#: the folder of the captures, one folder each (1, 2, ...), in the armed run's folder
CAPTURES_DIR = "captures"
#: The figures the workload reported with ``perfstack.report_metric`` (one JSON per line).
METRICS_FILE = "workload-metrics.jsonl"
#: Under torchrun, each rank's files are in ``rank-N/``.
RANK_PREFIX = "rank-"
