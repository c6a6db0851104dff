"""Output formats: the built-in formats; their contract is ``perfstack.plugin.renderer``
(``base`` here keeps the old path).

Each built-in format draws from the one view of a report (``perfstack.analysis.view``):
``text`` (a package: its grid, the report's sections, and one module a pane under the
pane's stem), ``markdown``, ``pyperf``, ``jsonreport``, ``trend`` for the history's series
and ``diff`` for the comparison of two reports, all in the words of ``words`` (one module a
concept, ``common`` for the rest). The HTML page and the merged trace are plugins.
"""
