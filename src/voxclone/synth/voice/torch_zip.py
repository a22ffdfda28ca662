"""Read a torch ``state_dict`` saved in torch's zip format, without torch.

A ``torch.save`` file since torch 1.6 is a zip archive: ``<root>/data.pkl``
pickles the dict, each tensor a call to ``torch._utils._rebuild_tensor_v2``
on a storage that the pickle names by a persistent id, and the storages lie
raw (little-endian) in ``<root>/data/<key>``. Unpickling runs whatever the
pickle names, so this reader allows only what a state dict holds — dicts,
OrderedDicts, tensors of plain numeric storages, numbers and strings — and
refuses anything else before it is built.
"""

from __future__ import annotations

import pickle
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from voxclone.errors import ModelAssetError

MAX_MEMBER_BYTES = 1 << 30  # no weight file we read comes near 1 GiB
_STORAGE_DTYPES: dict[str, Any] = {
    "FloatStorage": np.float32,
    "DoubleStorage": np.float64,
    "HalfStorage": np.float16,
    "LongStorage": np.int64,
    "IntStorage": np.int32,
    "ShortStorage": np.int16,
    "CharStorage": np.int8,
    "ByteStorage": np.uint8,
    "BoolStorage": np.bool_,
}


@dataclass(frozen=True)
class _StorageType:
    dtype: Any


@dataclass(frozen=True)
class _Storage:
    key: str
    dtype: Any
    count: int


@dataclass(frozen=True)
class _Tensor:
    storage: _Storage
    offset: int
    shape: tuple[int, ...]
    strides: tuple[int, ...]


class _OrderedDict(dict):  # type: ignore[type-arg]
    """Stands in for collections.OrderedDict (torch sets ``_metadata`` on it)."""


def _rebuild_tensor(storage: Any, offset: Any, shape: Any, strides: Any, *_: Any) -> _Tensor:
    if not isinstance(storage, _Storage):
        raise pickle.UnpicklingError("a tensor without a storage")
    return _Tensor(
        storage, int(offset), tuple(int(s) for s in shape), tuple(int(s) for s in strides)
    )


class _StateUnpickler(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> Any:
        if module == "collections" and name == "OrderedDict":
            return _OrderedDict
        if module == "torch._utils" and name == "_rebuild_tensor_v2":
            return _rebuild_tensor
        if module == "torch" and name in _STORAGE_DTYPES:
            return _StorageType(_STORAGE_DTYPES[name])
        raise pickle.UnpicklingError(f"refused object in the weights: {module}.{name}")

    def persistent_load(self, pid: Any) -> Any:
        # ("storage", storage type, key, location, element count)
        if not (isinstance(pid, tuple) and len(pid) == 5 and pid[0] == "storage"):
            raise pickle.UnpicklingError("unexpected persistent id in the weights")
        kind = pid[1]
        if not isinstance(kind, _StorageType):
            raise pickle.UnpicklingError("unexpected storage type in the weights")
        return _Storage(str(pid[2]), kind.dtype, int(pid[4]))


def _tensor_array(ref: _Tensor, raw: bytes) -> np.ndarray:
    dtype = np.dtype(ref.storage.dtype).newbyteorder("<")
    if len(raw) < ref.storage.count * dtype.itemsize:
        raise ModelAssetError(f"storage {ref.storage.key} of the weights is truncated")
    data = np.frombuffer(raw, dtype=dtype, count=ref.storage.count)
    if ref.shape:
        last = ref.offset + sum((n - 1) * s for n, s in zip(ref.shape, ref.strides, strict=True))
        if min(ref.shape) > 0 and (ref.offset < 0 or last >= data.size or min(ref.strides) < 0):
            raise ModelAssetError(
                f"a tensor of the weights reaches outside storage {ref.storage.key}"
            )
    elif ref.offset >= data.size:
        raise ModelAssetError(f"a tensor of the weights reaches outside storage {ref.storage.key}")
    view = np.lib.stride_tricks.as_strided(
        data[ref.offset :],
        shape=ref.shape,
        strides=tuple(s * dtype.itemsize for s in ref.strides),
        writeable=False,
    )
    return np.array(view, dtype=dtype.newbyteorder("="))  # own, native, contiguous


def read_state_dict(path: Path, inside: str | None = None) -> dict[str, np.ndarray]:
    """name -> array for every tensor of a zip-format ``torch.save`` state dict.

    ``inside`` names the entry that holds the state dict when the file saved a
    training checkpoint around it (resemble-perth: ``{"model": ..., "step": ...}``).
    """
    try:
        with zipfile.ZipFile(path) as archive:
            names = archive.namelist()
            pickles = [n for n in names if n.endswith("/data.pkl") and n.count("/") == 1]
            if len(pickles) != 1:
                raise ModelAssetError(f"{path.name} is not a torch zip-format file")
            root = pickles[0].rsplit("/", 1)[0]
            for info in archive.infolist():
                if info.file_size > MAX_MEMBER_BYTES:
                    raise ModelAssetError(f"{path.name} has an implausibly large member")
            with archive.open(pickles[0]) as stream:
                state = _StateUnpickler(stream).load()
            if inside is not None and isinstance(state, dict):
                state = state.get(inside)
            if not isinstance(state, dict):
                raise ModelAssetError(f"{path.name} does not hold a state dict")
            raws: dict[str, bytes] = {}
            out: dict[str, np.ndarray] = {}
            for name, ref in state.items():
                if not isinstance(name, str) or not isinstance(ref, _Tensor):
                    raise ModelAssetError(f"{path.name} holds a non-tensor entry")
                key = ref.storage.key
                if key not in raws:
                    raws[key] = archive.read(f"{root}/data/{key}")
                out[name] = _tensor_array(ref, raws[key])
            return out
    except (OSError, zipfile.BadZipFile, KeyError, pickle.UnpicklingError, EOFError) as exc:
        raise ModelAssetError(f"{path.name} could not be read as torch weights: {exc}") from exc
