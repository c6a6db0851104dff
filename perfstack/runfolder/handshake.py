"""What the driver and the bootstrap inside the workload's process agree on, besides the files'
names: the variable that carries the bootstrap's configuration, the signal that asks the
workload for its Python stack, and how long the workload waits for its samplers."""

from __future__ import annotations

import signal

#: The environment variable naming the bootstrap's configuration file (BOOTSTRAP_CONFIG_FILE).
CONFIG_ENV = "PERFSTACK_BOOTSTRAP"
#: The signal the driver sends for the workload's Python stack (written to FAULTHANDLER_FILE).
STACK_SIGNAL = signal.SIGUSR1
#: The workload waits at the start of its measured window for the driver's answer (the
#: samplers attached) at most this long, so no measured step goes unsampled.
WINDOW_WAIT_S = 15.0
