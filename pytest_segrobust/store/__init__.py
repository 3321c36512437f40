"""What a run keeps and compares across runs and processes: cell keys and baseline files,
their per-image statistics files, the record of one measured cell, and the decisions made of
cells and models (requirements, paired checks).

Layer 1: imports only :mod:`pytest_segrobust.core`.
"""
