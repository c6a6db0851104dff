"""The views of a report, one module a concept (``compile``, ``modules``, ``memory``, ``device``,
``steps``, ``roofline``, ``streams``, ``layers``): each turns the report's rows and metrics
into what every format shows of that concept. ``perfstack.analysis.view`` gathers them into
the one view of a report."""
