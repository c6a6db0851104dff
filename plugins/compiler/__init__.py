"""torch.compile's compile layer: the ``dynamo`` backend (``backend``) and the in-process hook
that saves dynamo's records in every run (``capture``).

Nothing is imported here: the hook runs inside the workload, in the baseline runs too, so
loading it must not pull in perfstack's report model (``backend`` does).
"""
