"""Robustness suites: the YAML schema validated into typed objects, the release criteria
a suite requires, and how a suite's model spec becomes a model.

Layer 4: imports the domain (corruptions, text, data, metrics, models, tasks) and the layers below.
"""
