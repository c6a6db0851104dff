"""A plugin for another perfstack: its hook has an argument this perfstack does not pass, and
it implements a hook that does not exist here."""

import perfstack


@perfstack.hookimpl
def perfstack_findings(report: object, baseline_report: object) -> list[object]:
    return []
