""".npy files and bf16 values with the Python standard library only (CI's python3 has no NumPy),
for the tests of `mxfp6c run` and mxfp6-run.

The format (NumPy's format.py, version 1.0): the magic b'\\x93NUMPY', the version bytes 1 0, a
little-endian uint16 header length, then the header, a Python dict literal with 'descr',
'fortran_order' and 'shape', padded with spaces and a newline so the data starts at a multiple of
64 bytes; then the elements in C order. bf16 tensors are '<u2' arrays of their bits."""
import ast
import math
import random
import struct

_FORMATS = {"<u2": "H", "<f4": "f", "<i4": "i", "|u1": "B"}


def header_bytes(descr, shape):
    """The magic, version, length and padded header of a version 1.0 file."""
    dims = "".join(f"{d}, " for d in shape) if len(shape) == 1 else ", ".join(str(d) for d in shape)
    header = "{'descr': '%s', 'fortran_order': False, 'shape': (%s), }" % (descr, dims)
    header += " " * ((64 - (10 + len(header) + 1) % 64) % 64) + "\n"
    return b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header.encode("latin1")


def save(path, descr, shape, values):
    """Writes `values` (a flat list in C order) as a `descr` array of `shape`."""
    assert len(values) == math.prod(shape)
    with open(path, "wb") as f:
        f.write(header_bytes(descr, shape) + struct.pack("<%d%s" % (len(values), _FORMATS[descr]), *values))


def load(path):
    """(descr, shape, flat list of values) of a version 1.0 file."""
    with open(path, "rb") as f:
        data = f.read()
    assert data[:8] == b"\x93NUMPY\x01\x00", f"{path}: not a version 1.0 .npy file"
    (length,) = struct.unpack("<H", data[8:10])
    header = ast.literal_eval(data[10:10 + length].decode("latin1"))
    assert header["fortran_order"] is False
    descr, shape = header["descr"], tuple(header["shape"])
    count = math.prod(shape)
    values = struct.unpack_from("<%d%s" % (count, _FORMATS[descr]), data, 10 + length)
    assert (10 + length) % 64 == 0 and len(data) == 10 + length + count * struct.calcsize(_FORMATS[descr])
    return descr, shape, list(values)


def bf16_bits(x):
    """The bf16 nearest to the float `x` (ties to even), as its 16 bits."""
    (b,) = struct.unpack("<I", struct.pack("<f", x))
    return (b + 0x7FFF + ((b >> 16) & 1)) >> 16


def bf16_value(bits):
    """The float a bf16's 16 bits stand for."""
    return struct.unpack("<f", struct.pack("<I", bits << 16))[0]


def bf16_ulp(x):
    """The spacing of bf16 values at |x|: 2^(e - 7) for 2^e <= |x| < 2^(e+1), at least 2^-133."""
    e = math.frexp(abs(x))[1] - 1 if x != 0 else -126
    return math.ldexp(1.0, max(e, -126) - 7)


def random_bf16(count, seed, scale=1.0):
    """`count` bf16 bits of N(0, scale^2) samples, the same for the same seed."""
    rng = random.Random(seed)
    return [bf16_bits(rng.gauss(0.0, scale)) for _ in range(count)]
