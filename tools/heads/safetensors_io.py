"""Minimal safetensors reading and writing with numpy only (F32, F16)."""
import json
import struct
from pathlib import Path

import numpy as np

_DTYPES = {"F32": np.float32, "F16": np.float16}


def read(path: Path) -> dict[str, np.ndarray]:
    data = Path(path).read_bytes()
    (size,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8 : 8 + size])
    body = memoryview(data)[8 + size :]
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        begin, end = info["data_offsets"]
        array = np.frombuffer(body[begin:end], dtype=_DTYPES[info["dtype"]])
        out[name] = array.reshape(info["shape"])
    return out


def write(path: Path, tensors: dict[str, np.ndarray]) -> None:
    header, chunks, offset = {}, [], 0
    for name, array in tensors.items():
        kind = {np.dtype(np.float32): "F32", np.dtype(np.float16): "F16"}[array.dtype]
        raw = np.ascontiguousarray(array).tobytes()
        header[name] = {"dtype": kind, "shape": list(array.shape), "data_offsets": [offset, offset + len(raw)]}
        chunks.append(raw)
        offset += len(raw)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * ((8 - len(text) % 8) % 8)
    Path(path).write_bytes(struct.pack("<Q", len(text)) + text + b"".join(chunks))
