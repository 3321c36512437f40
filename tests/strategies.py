"""The tests use the public strategies; this module keeps their historical import path."""

from pytest_segrobust.strategies import Batch, batches, instances_of, make_batch, severities

_make = make_batch

__all__ = ["Batch", "_make", "batches", "instances_of", "make_batch", "severities"]
