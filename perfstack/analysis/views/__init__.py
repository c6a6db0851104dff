"""The views of the page around the panes: where the time goes (``budget``), the
drill-down from functions to ops to kernels (``drilldown``), each layer's top rows
(``layers``) and what an analysis read (``recorded``). The panes' own figures are
``perfstack.analysis.panes``; ``perfstack.analysis.view`` gathers both into the one view of a
report."""
