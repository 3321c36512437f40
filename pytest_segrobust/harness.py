"""The ``segrobust`` fixture: robustness evaluation inside users' own tests.

Example::

    def test_jpeg_robustness(segrobust, my_model, my_dataset):
        result = segrobust.evaluate(my_model, my_dataset, corruption="jpeg_compression", severity=3)
        assert result.gamma_r > 0.9
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pytest_segrobust.corruptions import DEFAULT_PRESET, REGISTRY
from pytest_segrobust.data.base import SegmentationDataset
from pytest_segrobust.evaluation import CellResult, evaluate
from pytest_segrobust.models import as_instance_model, as_segmentation_model

if TYPE_CHECKING:
    from pytest_segrobust.session import SegRobustSession


class Harness:
    """Evaluates models under named corruptions; clean results are computed once per session."""

    def __init__(self, session: SegRobustSession) -> None:
        self._session = session

    def evaluate(
        self,
        model: Any,
        dataset: SegmentationDataset,
        corruption: str,
        severity: int,
        *,
        preset: str = DEFAULT_PRESET,
        metric: str = "miou",
        seed: int = 0,
        batch_size: int = 16,
        limit: int | None = None,
    ) -> CellResult:
        """Score ``model`` on ``dataset`` under ``corruption`` at ``severity``.

        Args:
            model: A :class:`~pytest_segrobust.models.SegmentationModel` or an ``nn.Module``
                returning logits; for ``metric="map"`` an instance model, or an ``nn.Module``
                returning instances per image.
            dataset: Any :class:`~pytest_segrobust.data.base.SegmentationDataset` (with
                instances, for ``map``).
            corruption: A corruption name of ``preset``.
            severity: 1 to 5 (0 gives the clean result).
            preset: Whose severity table to use.
            metric: ``"miou"`` (semantic) or ``"map"`` (instance, COCO mask AP).
            seed: Global seed of the corruptions.
            batch_size: Images per forward pass.
            limit: Use only the first ``limit`` images.

        Returns:
            A result with ``.score``, ``.clean_score``, ``.gamma_r`` and ``.gamma_a``.
        """
        segmenter = as_instance_model(model) if metric == "map" else as_segmentation_model(model)
        chosen = REGISTRY.get(corruption, preset)
        options = {"metric": metric, "seed": seed, "batch_size": batch_size, "limit": limit}
        key = ("fixture", metric, segmenter.fingerprint(), dataset.fingerprint(), str(limit))
        clean = self._session.clean_cached(key, lambda: evaluate(segmenter, dataset, **options))
        corrupted = evaluate(segmenter, dataset, chosen, severity, **options)
        return CellResult(corrupted=corrupted, clean=clean)
