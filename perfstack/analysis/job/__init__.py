"""A job of many ranks, from its reports: each rank's figures by name (``perrank``), the
figures across the ranks and the stragglers (``distributed``, ``straggler``), the time in
collectives split into waiting and moving (``collectivesplit``), and the per-node reports of
one job joined into one (``merge``)."""
