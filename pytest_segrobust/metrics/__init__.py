"""Segmentation metrics: sufficient statistics with a pure ``compute``, registered by name.

Layer 2: imports the layers below; never models nor data.
"""

from pytest_segrobust.metrics.base import Metric, MetricContext, MetricResult, Reduction
from pytest_segrobust.metrics.miou import ConfusionMatrix, IoUResult, MeanIoU, iou_from_confusion
from pytest_segrobust.metrics.registry import METRICS, register_metric

__all__ = [
    "METRICS",
    "ConfusionMatrix",
    "IoUResult",
    "MeanIoU",
    "Metric",
    "MetricContext",
    "MetricResult",
    "Reduction",
    "iou_from_confusion",
    "register_metric",
]
