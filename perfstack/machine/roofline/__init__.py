"""What this machine can reach, its roofline's ceilings: the record of one device's peaks
(``ceilingrecord``), measuring them in a process of its own (``ceilingprobe``), this
machine's, measured once and cached (``ceilings``), and the published peaks of the GPUs
perfstack knows (``datasheets``)."""
