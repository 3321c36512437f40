"""The ``segrobust`` fixture: robustness evaluation inside users' own tests.

Example::

    def test_jpeg_robustness(segrobust, my_model, my_dataset):
        result = segrobust.evaluate(my_model, my_dataset, corruption="jpeg_compression", severity=3)
        assert result.gamma_r > 0.9
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from pytest_segrobust.corruptions import DEFAULT_PRESET
from pytest_segrobust.data.base import SegmentationDataset
from pytest_segrobust.engine.evaluation import CellResult

if TYPE_CHECKING:
    from pytest_segrobust.run.session import SegRobustSession


class Harness:
    """Evaluates models under named corruptions with the run's settings.

    The fixture shares the run's workbench: ``--segrobust-device``, ``--segrobust-amp``,
    ``--segrobust-batch-size`` and ``--segrobust-loader-workers`` apply, models are adapted
    as suite models are (registered adapters and the ``pytest_segrobust_adapt_model``
    hook), and each clean result is computed once per session.
    """

    def __init__(self, session: SegRobustSession) -> None:
        self._session = session

    def evaluate(
        self,
        model: Any,
        dataset: SegmentationDataset,
        corruption: str,
        severity: int,
        *,
        task: str = "semantic",
        metrics: Sequence[str] | None = None,
        metric: str | None = None,
        preset: str = DEFAULT_PRESET,
        seed: int = 0,
        batch_size: int = 16,
        limit: int | None = None,
    ) -> CellResult:
        """Score ``model`` on ``dataset`` under ``corruption`` at ``severity``.

        Args:
            model: A model of ``task``, or an object an adapter fits to it (an ``nn.Module``
                returning logits for ``semantic``, instances per image for ``instance``).
            dataset: Any :class:`~pytest_segrobust.data.base.SegmentationDataset` with the
                targets the task needs.
            corruption: A corruption name of ``preset``.
            severity: 1 to 5 (0 gives the clean result).
            task: ``semantic``, ``instance``, ``panoptic`` or a plugin's task.
            metrics: Metric names, the headline first (default: the task's).
            metric: One metric, shorthand for ``metrics=[metric]``; ``"map"`` alone implies
                ``task="instance"`` as before tasks existed.
            preset: Whose severity table to use.
            seed: Global seed of the corruptions.
            batch_size: Images per forward pass (``--segrobust-batch-size`` overrides it).
            limit: Use only the first ``limit`` images.

        Returns:
            A result with ``.score``, ``.clean_score``, ``.gamma_r`` and ``.gamma_a`` of the
            headline, ``.robustness(name)`` of every metric, and both :class:`EvalResult` s.
        """
        if metric is not None:
            if metrics is not None:
                raise TypeError("give either metric or metrics, not both")
            metrics = (metric,)
            if metric == "map" and task == "semantic":
                task = "instance"
        return self._session.runner.bench.evaluate_object(
            model,
            dataset,
            corruption,
            severity,
            task=task,
            metrics=None if metrics is None else tuple(metrics),
            preset=preset,
            seed=seed,
            batch_size=batch_size,
            limit=limit,
        )
