"""The verdict on a measured cell: its paired evidence, its baseline and tolerance, its
release criteria, and each model's aggregate decisions; pure functions of what was
observed and what is stored.

Layer 6: imports the engine's results and the layers below; never the report, the backends or
the pytest integration.
"""
