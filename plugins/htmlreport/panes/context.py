"""What a pane's HTML may read beyond its own figures: the report and its layers' tables."""

from __future__ import annotations

from typing import Any

from perfstack.records import datarecord, field
from perfstack.report import Report

from ..tables import Tables


@datarecord
class PageContext:
    """The page a pane is drawn on: the report (for what a pane draws from its rows, as the
    ranks' heat map), the layers' tables (a pane lists its layer's rows with them) and
    whether there is a timeline to link to."""

    report: Report
    tables: Tables
    #: the page's own tables a pane adds (id -> the spec the page's script lays out, as the
    #: layers' tables are: a pane of thousands of cells is no burden on the page's first draw)
    specs: dict[str, Any] = field(default_factory=dict)
    #: whether the page has a Timeline pane (a pane's rows may link to their slices on it)
    timeline: bool = False
