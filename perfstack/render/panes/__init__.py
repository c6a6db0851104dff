"""Each pane in text and markdown, one module a pane under the stem of its figures
(``perfstack.analysis.panes``): ``text(page, v)`` draws it on the terminal's page
(``perfstack.render.text``), ``markdown(v)`` returns its lines."""
