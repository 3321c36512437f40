"""How a process computes: the run's settings, its device, threads and allocator, the time
limit of a cell, its log records and its progress bar, and the byte budget of its caches.

Layer 1: imports only :mod:`pytest_segrobust.core`.
"""
