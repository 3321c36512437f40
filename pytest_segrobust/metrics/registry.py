"""Metrics by name: the built-ins and those of installed plugins (entry point group ``segrobust.metrics``)."""

from __future__ import annotations

from pytest_segrobust.core.registry import NamedRegistry

ENTRY_POINT_GROUP = "segrobust.metrics"

METRICS: NamedRegistry = NamedRegistry(
    "metric",
    ENTRY_POINT_GROUP,
    (
        "pytest_segrobust.metrics.miou",
        "pytest_segrobust.metrics.coco_map",
        "pytest_segrobust.metrics.boundary_iou",
        "pytest_segrobust.metrics.panoptic_quality",
        "pytest_segrobust.metrics.referring",
        "pytest_segrobust.metrics.video",
        "pytest_segrobust.metrics.youtube_vos",
        "pytest_segrobust.metrics.avs",
        "pytest_segrobust.metrics.promptable",
    ),
)
register_metric = METRICS.register
