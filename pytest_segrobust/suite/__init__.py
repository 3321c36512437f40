"""Robustness suites: the YAML schema validated into typed objects, the release criteria
a suite requires, the factories it names, and how a suite's model spec becomes a model (the
model sources, one per key of a model entry, in :mod:`~pytest_segrobust.suite.model_sources`).

Layer 4: imports the domain (corruptions, text, data, metrics, models, tasks) and the layers below.
"""
