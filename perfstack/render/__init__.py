"""Output formats: the built-in formats; their contract is ``base``.

Each built-in format draws from the one view of a report (``perfstack.analysis.view``):
``text`` (a package: the page, its grid, and one module a concept under its view's stem),
``markdown``, ``pyperf``, and ``diff`` for the comparison of two reports, all in the words of
``words`` (one module a concept, ``common`` for the rest). The HTML page and the merged trace
are plugins.
"""
