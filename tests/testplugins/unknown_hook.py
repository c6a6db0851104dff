"""A plugin implementing a hook this perfstack does not have."""

import perfstack


@perfstack.hookimpl
def perfstack_collect_gpu_counters() -> list[object]:
    return []
