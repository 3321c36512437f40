"""Random numbers that depend only on (seed, sample, perturbation, severity, frame):
Philox-4x32-10 on every device and the per-sample streams built on it.

Layer 1: imports only :mod:`pytest_segrobust.core`.
"""
