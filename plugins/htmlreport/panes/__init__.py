"""The HTML page's panes and sections, one module a concept under the stem of its view
(``perfstack.analysis.panes.PANES``), and the page they are drawn on (``context``)."""
