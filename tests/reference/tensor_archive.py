"""Reads and writes Strata tensor archives (magic b"STRATNSR", version 1; see docs/formats.md)."""
import struct

import numpy as np

MAGIC = b"STRATNSR"
VERSION = 1
DTYPES = {0: np.float32, 1: np.int32, 2: np.float64}
CODES = {np.dtype(np.float32): 0, np.dtype(np.int32): 1, np.dtype(np.float64): 2}


def write(path, tensors):
    """tensors: dict name -> numpy array (float32, int32 or float64)."""
    with open(path, "wb") as f:
        f.write(MAGIC)
        f.write(struct.pack("<II", VERSION, len(tensors)))
        for name in sorted(tensors):
            a = np.ascontiguousarray(tensors[name])
            code = CODES[a.dtype]
            raw = name.encode("utf-8")
            f.write(struct.pack("<I", len(raw)))
            f.write(raw)
            f.write(struct.pack("<II", code, a.ndim))
            for d in a.shape:
                f.write(struct.pack("<Q", d))
            f.write(a.astype(a.dtype.newbyteorder("<")).tobytes())


def read(path):
    with open(path, "rb") as f:
        data = f.read()
    if data[:8] != MAGIC:
        raise ValueError(f"{path}: not a Strata tensor archive")
    version, count = struct.unpack_from("<II", data, 8)
    if version != VERSION:
        raise ValueError(f"{path}: version {version} unsupported")
    pos = 16
    out = {}
    for _ in range(count):
        (n,) = struct.unpack_from("<I", data, pos)
        pos += 4
        name = data[pos : pos + n].decode("utf-8")
        pos += n
        code, ndim = struct.unpack_from("<II", data, pos)
        pos += 8
        shape = struct.unpack_from("<" + "Q" * ndim, data, pos)
        pos += 8 * ndim
        dtype = np.dtype(DTYPES[code]).newbyteorder("<")
        size = int(np.prod(shape)) * dtype.itemsize
        out[name] = np.frombuffer(data, dtype=dtype, count=int(np.prod(shape)), offset=pos).reshape(shape)
        pos += size
    return out
