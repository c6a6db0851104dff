"""Output formats: the built-in formats; their contract is ``base``.

Each built-in format is a module of this package and draws from the one view of a report
(``perfstack.analysis.view``): ``text`` (its device sections in ``textdevice``),
``markdown``, ``pyperf``, and ``diff`` for the comparison of two reports, all in the words
of ``words`` and ``devicewords``. The HTML page and the merged trace are plugins.
"""
