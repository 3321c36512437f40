"""Segmentation metrics as sufficient statistics with pure ``compute``."""

from pytest_segrobust.metrics.miou import ConfusionMatrix, IoUResult, iou_from_confusion

__all__ = ["ConfusionMatrix", "IoUResult", "iou_from_confusion"]
