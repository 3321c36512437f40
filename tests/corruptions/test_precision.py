"""ieee_float32: the corruptions' convolutions and products never run in TF32, and the user's settings come back."""

from __future__ import annotations

import pytest
import torch

from pytest_segrobust.corruptions.functional.precision import _new_api, ieee_float32

NEW_API = pytest.mark.skipif(not _new_api(), reason="torch < 2.9 has only the legacy allow_tf32 flags")


@NEW_API
def test_cuda_blocks_run_in_ieee_float32_and_give_the_settings_back() -> None:
    conv, matmul = torch.backends.cudnn.conv, torch.backends.cuda.matmul
    before = conv.fp32_precision, matmul.fp32_precision
    try:
        conv.fp32_precision = matmul.fp32_precision = "tf32"  # a user who turned TF32 on for the model
        with ieee_float32(torch.device("cuda", 0)):
            assert (conv.fp32_precision, matmul.fp32_precision) == ("ieee", "ieee")
        assert (conv.fp32_precision, matmul.fp32_precision) == ("tf32", "tf32")
        with pytest.raises(RuntimeError, match="inside"), ieee_float32(torch.device("cuda")):
            raise RuntimeError("inside")
        assert (conv.fp32_precision, matmul.fp32_precision) == ("tf32", "tf32")
    finally:
        conv.fp32_precision, matmul.fp32_precision = before


@NEW_API
def test_cpu_blocks_change_nothing() -> None:
    conv = torch.backends.cudnn.conv
    before = conv.fp32_precision
    try:
        conv.fp32_precision = "tf32"
        with ieee_float32(torch.device("cpu")):
            assert conv.fp32_precision == "tf32"
    finally:
        conv.fp32_precision = before
