"""pytest-segrobust: gate segmentation models on robustness, the way unit tests gate code."""

from pytest_segrobust.corruptions import REGISTRY
from pytest_segrobust.evaluation import CellResult, EvalResult, evaluate
from pytest_segrobust.scores import absolute_robustness, relative_robustness

__version__ = "0.1.0"

__all__ = [
    "REGISTRY",
    "CellResult",
    "EvalResult",
    "__version__",
    "absolute_robustness",
    "evaluate",
    "relative_robustness",
]
