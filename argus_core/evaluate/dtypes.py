"""The dtype names Argus uses ("bf16", "fp16", "fp32", ...) and their sizes.

Kept free of torch so that cost models and policy checks can use it cheaply; `torch_dtype`
imports torch only when called.
"""

from __future__ import annotations

from typing import Any

from argus_core.errors import ConfigError, choices_error

ELEMENT_BYTES: dict[str, int] = {
    "fp8": 1,
    "bf16": 2,
    "fp16": 2,
    "fp32": 4,
    "fp64": 8,
    "i8": 1,
    "i32": 4,
    "i64": 8,
}

_TORCH_NAMES: dict[str, str] = {
    "bf16": "bfloat16",
    "fp16": "float16",
    "fp32": "float32",
    "fp64": "float64",
    "i8": "int8",
    "i32": "int32",
    "i64": "int64",
}


def element_bytes(dtype: str) -> int:
    """Bytes per element of `dtype`; ConfigError naming the valid names otherwise."""
    if dtype not in ELEMENT_BYTES:
        raise ConfigError(choices_error("dtype", dtype, ELEMENT_BYTES))
    return ELEMENT_BYTES[dtype]


def torch_dtype(dtype: str) -> Any:
    """The torch dtype named by `dtype` ("bf16" -> torch.bfloat16)."""
    import torch

    if dtype not in _TORCH_NAMES:
        raise ConfigError(choices_error("dtype", dtype, _TORCH_NAMES))
    return getattr(torch, _TORCH_NAMES[dtype])
