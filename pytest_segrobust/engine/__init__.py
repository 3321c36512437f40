"""Plans and measures cells: a suite resolved once, models and datasets built and
memoised, the one evaluation loop, cells cut into pieces, clean results cached, and the
pictures measured where the models are warm.

Layer 5: imports the suite, the domain and the layers below; never the gate, the report,
the backends or the pytest integration.
"""
