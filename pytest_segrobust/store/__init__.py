"""What a run keeps and compares across runs and processes: cell keys and baseline files,
their per-image statistics files, and the record of one measured cell.

Layer 1: imports only :mod:`pytest_segrobust.core`.
"""
