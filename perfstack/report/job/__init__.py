"""A job of many ranks in the report: one row per op, kernel or function, not one a rank
(``rankrows``), folded a rank at a time (``rankfold``), a big job's per-rank figures as
columns (``rankcolumns``), and one copy of what many ranks repeat (``canon``)."""
