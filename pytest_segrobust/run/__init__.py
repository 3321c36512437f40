"""One robustness run under pytest (the controller): the session that owns the run's
state, the collection items, what was selected, the order of the report, the ``segrobust``
fixture, the hook specifications, and the writes at the end: baselines and the report files.

Layer 9: imports every layer below; only :mod:`pytest_segrobust.plugin` and
:mod:`pytest_segrobust.cli` import it.
"""
