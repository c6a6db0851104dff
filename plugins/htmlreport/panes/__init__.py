"""The HTML page's panes and sections, one module a concept under the stem of its view
(``compile``, ``modules``, ``memory``, ``steps``, ``roofline``)."""
