"""Outputs from an untrusted process come back as plain arrays (`outputs.pack_arrays`), and
anything malformed is refused with a reason; nothing in a blob can run code here."""

from __future__ import annotations

import json
import pickle

import numpy as np
import pytest
import torch

from argus_core.evaluate.outputs import PACK_MAGIC, PackError, pack_arrays, unpack_arrays


def test_round_trip_keeps_values_dtypes_and_meta():
    a = torch.randn(3, 5)
    b = torch.arange(6, dtype=torch.int32).reshape(2, 3)
    c = torch.randn(4, dtype=torch.bfloat16)  # numpy has no bf16: sent as float32
    meta, arrays = unpack_arrays(pack_arrays({"counts": [3], "error": ""}, [a, b, c]))
    assert meta == {"counts": [3], "error": ""}
    assert np.array_equal(arrays[0], a.numpy()) and arrays[1].dtype == np.int32
    assert arrays[2].dtype == np.float32 and np.array_equal(arrays[2], c.float().numpy())


def _blob(header: dict, data: bytes = b"") -> bytes:
    head = json.dumps(header).encode()
    return PACK_MAGIC + len(head).to_bytes(8, "little") + head + data


@pytest.mark.parametrize(
    ("blob", "says"),
    [
        (pickle.dumps({"ok": True}), "bad magic"),
        (b'{"ok": true}', "bad magic"),
        (_blob({"meta": {}, "arrays": [{"dtype": "object", "shape": [1]}]}), "dtype 'object'"),
        (_blob({"meta": {}, "arrays": [{"dtype": "float32", "shape": [-1]}]}), "shape"),
        (_blob({"meta": {}, "arrays": [{"dtype": "float32", "shape": [4]}]}, b"\0" * 8), "shorter"),
        (_blob({"meta": {}, "arrays": []}, b"junk"), "after the last array"),
        (PACK_MAGIC + (1 << 40).to_bytes(8, "little"), "does not fit"),
    ],
)
def test_malformed_blobs_are_refused(blob, says):
    with pytest.raises(PackError, match=says):
        unpack_arrays(blob)


def test_a_scalar_output_keeps_its_shape():
    """A 0-d output (a loss, a whole-tensor mean) comes back 0-d, not shape (1,)."""
    import torch

    from argus_core.evaluate.outputs import pack_arrays, unpack_arrays

    _, (scalar, vec) = unpack_arrays(pack_arrays({}, [torch.tensor(2.5), torch.ones(3)]))
    assert scalar.shape == () and float(scalar) == 2.5
    assert vec.shape == (3,)
