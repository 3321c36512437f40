"""What a model's results depend on besides its weights: the fingerprint of the code that
builds and runs it, and the files and modules that code reads.

Layer 1: imports only :mod:`pytest_segrobust.core`.
"""
