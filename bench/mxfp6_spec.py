#!/usr/bin/env python3
"""MXFP6 row packing as docs/mxfp6-format.md states it, for the benchmark's bit-exact check of the
packers. Pure Python (no torch, no numpy); run it to self-test on the spec's worked examples:

    python3 bench/mxfp6_spec.py

Two implementations of the same spec live here:

- `scale_byte_spec`, `encode_spec`, `pack_rows_spec`: a literal transcription of the spec's
  pseudo-code on one block at a time, exact rational arithmetic (fractions.Fraction) for
  y = x * 2^-s and its rounding. Slow; the oracle.
- `scale_bytes`, `encode_codes`, `pack_words`: the same spec as integer operations on the bf16
  bits, written once against a small namespace of operations (`ns`: where, clamps, shifts,
  floor_log2), so the very same expressions run on Python ints here (`SCALAR`) and on torch
  tensors on the GPU machine (problems.TORCH_NS: the eager/torch.compile packer and the reference
  our kernels are checked against). The self-test checks them against the transcription over a
  sweep of bf16 bit patterns and scales, so the tensor code is tested here, without torch.

Conventions (compiler/interp/mxfp6.h, which the GPU kernels match): amax is the largest magnitude
bits (bits & 0x7FFF) of the block's finite elements; a NaN or Inf anywhere in the block gives
scale 0xFF and every element of that block is written as sign|0x1F.
"""
import fractions
import struct
import sys

# docs/mxfp6-format.md sections 1 and 2.
FORMATS = {
    #        EMAX EMIN MB  RC   EV
    "E2M3": (2, 0, 3, 112, 120),
    "E3M2": (4, -2, 2, 96, 112),
}
MODES = ("RCEIL", "EVEN", "FLOOR")
# The code objects' variant indices (kernels_dsl/mxfp6_pack.mxk: FMT in {E2M3, E3M2},
# MODE in {RCEIL, EVEN, FLOOR}), as the metadata's "config" reports them.
FMT_INDEX = {"E2M3": 0, "E3M2": 1}
MODE_INDEX = {"RCEIL": 0, "EVEN": 1, "FLOOR": 2}
NAN_SCALE = 0xFF
BLOCK = 32


def bf16_bits(value):
    """bf16 bits of a Python float (round to nearest even through f32; finite inputs here)."""
    f32 = struct.unpack("<I", struct.pack("<f", value))[0]
    return ((f32 + 0x7FFF + ((f32 >> 16) & 1)) >> 16) & 0xFFFF


def bf16_value(bits):
    """The exact value of finite bf16 bits as a Fraction."""
    sign = -1 if bits & 0x8000 else 1
    e, m = (bits >> 7) & 0xFF, bits & 0x7F
    if e == 0xFF:
        raise ValueError("NaN/Inf has no exact value")
    if e == 0:
        return sign * fractions.Fraction(m, 1 << 133)  # m * 2^-133
    return sign * fractions.Fraction(128 + m) * fractions.Fraction(2) ** (e - 134)


def _nonfinite(bits):
    return (bits & 0x7F80) == 0x7F80


# ---------------------------------------------------------------------------------------------
# The transcription (one block at a time, exact arithmetic)

def scale_byte_spec(amax_bits, block_has_nan_or_inf, fmt, mode):
    """The spec's scale_byte, line by line."""
    emax, _, _, rc, ev = FORMATS[fmt]
    E, m7 = (amax_bits >> 7) & 0xFF, amax_bits & 0x7F
    if block_has_nan_or_inf:
        return 0xFF
    if E == 0:
        return 0x00
    s = (E - 127) - emax
    if mode == "RCEIL":
        s += 1 if m7 > rc else 0
    elif mode == "EVEN":
        s += 1 if m7 >= ev else 0
    return max(-127, min(127, s)) + 127


def _floor_log2(a):
    """floor(log2(a)) of a Fraction a > 0."""
    e = a.numerator.bit_length() - a.denominator.bit_length()
    two = fractions.Fraction(2)
    while two ** e > a:
        e -= 1
    while two ** (e + 1) <= a:
        e += 1
    return e


def _round_half_even(t):
    fl = t.numerator // t.denominator
    frac = t - fl
    if frac > fractions.Fraction(1, 2) or (frac == fractions.Fraction(1, 2) and fl % 2 == 1):
        return fl + 1
    return fl


def encode_spec(y, sgn, fmt):
    """The spec's encode(y) of an exact y (a Fraction) with sign bit sgn (kept for zero)."""
    _, emin, mb, _, _ = FORMATS[fmt]
    a = abs(y)
    if a == 0:
        return sgn << 5
    e = _floor_log2(a)
    qe = max(e, emin) - mb
    r = _round_half_even(a * fractions.Fraction(2) ** -qe)
    cm = (max(e - emin + 1, 0) << mb) + r - ((1 << mb) if e >= emin else 0)
    return min(cm, 31) | sgn << 5


def encode_block_spec(bits_block, fmt, mode):
    """(scale byte, 32 codes) of up to 32 bf16 bit patterns, zero-padded."""
    block = list(bits_block) + [0] * (BLOCK - len(bits_block))
    has = any(_nonfinite(b) for b in block)
    amax = max((b & 0x7FFF) for b in block if not _nonfinite(b)) if not all(_nonfinite(b) for b in block) else 0
    sb = scale_byte_spec(amax, has, fmt, mode)
    if sb == NAN_SCALE:
        return sb, [0x1F | ((b >> 15) & 1) << 5 for b in block]
    s = sb - 127
    return sb, [encode_spec(bf16_value(b) * fractions.Fraction(2) ** -s, (b >> 15) & 1, fmt) for b in block]


def pack4_spec(c0, c1, c2, c3):
    w = c0 | c1 << 6 | c2 << 12 | c3 << 18
    return [w & 0xFF, (w >> 8) & 0xFF, (w >> 16) & 0xFF]


def pack_rows_spec(rows_bits, cols, fmt, mode):
    """Row blobs (data bytes, scale bytes) of rows of bf16 bits, each `cols` long (cols % 32 == 0)."""
    data, scales = [], []
    for row in rows_bits:
        assert len(row) == cols and cols % BLOCK == 0
        for b0 in range(0, cols, BLOCK):
            sb, codes = encode_block_spec(row[b0:b0 + BLOCK], fmt, mode)
            scales.append(sb)
            for i in range(0, BLOCK, 4):
                data += pack4_spec(*codes[i:i + 4])
    return data, scales


# ---------------------------------------------------------------------------------------------
# The same spec as integer operations on the bits, for any backend `ns`

class _Scalar:
    """Python ints and bools: the namespace the self-test runs the tensor expressions with."""
    where = staticmethod(lambda c, a, b: a if c else b)
    clamp_min = staticmethod(lambda x, lo: max(x, lo))
    clamp_max = staticmethod(lambda x, hi: min(x, hi))
    shl = staticmethod(lambda a, n: a << n)
    floor_log2 = staticmethod(lambda m: m.bit_length() - 1 if m else 0)


SCALAR = _Scalar()


def mode_threshold(fmt, mode):
    """s += (m7 > threshold): RCEIL's m7 > RC, EVEN's m7 >= EV, FLOOR never (m7 <= 127)."""
    _, _, _, rc, ev = FORMATS[fmt]
    return {"RCEIL": rc, "EVEN": ev - 1, "FLOOR": 127}[mode]


def scale_bytes(ns, amax, has_nonfinite, fmt, mode):
    """Scale bytes from the amax magnitude bits of each block (finite elements only) and whether
    the block holds a NaN/Inf."""
    emax = FORMATS[fmt][0]
    E = amax >> 7
    m7 = amax & 0x7F
    s = E - (127 + emax) + (m7 > mode_threshold(fmt, mode))
    byte = ns.clamp_max(ns.clamp_min(s, -127), 127) + 127
    byte = ns.where(E == 0, 0, byte)
    return ns.where(has_nonfinite, NAN_SCALE, byte)


def encode_codes(ns, bits, s, fmt):
    """6-bit codes of bf16 elements (bits, 0..65535) of blocks with scale exponent s (the scale
    byte - 127): the spec's encode of y = x * 2^-s, exactly, on the integer significand.
    |x| = M * 2^k with M < 256; e = floor_log2(y); r = round_half_even(M * 2^(k - s - qe)).
    NaN/Inf elements give sign|0x1F (their block's scale is 0xFF; callers write sign|0x1F for
    the whole of such a block)."""
    _, emin, mb, _, _ = FORMATS[fmt]
    sign = (bits >> 15) & 1
    ex = (bits >> 7) & 0xFF
    m = bits & 0x7F
    sub = ex == 0
    M = ns.where(sub, m, m + 128)
    k = ns.where(sub, -133, ex - 134)
    e = ns.floor_log2(M) + k - s
    qe = ns.clamp_min(e, emin) - mb
    shift = k - s - qe                      # <= MB always; < 0: round off -shift bits
    n = ns.clamp_max(ns.clamp_min(-shift, 0), 10)  # M < 2^8: 10 bits off rounds to 0 like any more
    q = M >> n
    rem = M & (ns.shl(1, n) - 1)
    half = ns.shl(1, n) >> 1
    up = (n > 0) & ((rem > half) | ((rem == half) & ((q & 1) == 1)))
    r = ns.where(shift >= 0, ns.shl(M, ns.clamp_max(ns.clamp_min(shift, 0), mb)), q + up)
    # The spec's cm = (max(e - EMIN + 1, 0) << MB) + r - (e >= EMIN ? 1 << MB : 0), folded: it is
    # ((e - EMIN) << MB) + r for e >= EMIN and r below (no select between two constants, so a
    # tensor backend keeps int32).
    cm = ns.shl(ns.clamp_min(e - emin, 0), mb) + r
    code = ns.clamp_max(cm, 31)
    code = ns.where(M == 0, 0, code)
    code = ns.where(ex == 0xFF, 31, code)
    return code | (sign << 5)


def pack_words(c0, c1, c2, c3):
    """Four codes -> the 24-bit word whose bytes (low first) are stored."""
    return c0 | (c1 << 6) | (c2 << 12) | (c3 << 18)


def encode_block_ns(bits_block, fmt, mode):
    """encode_block_spec through the integer expressions on Python ints."""
    block = list(bits_block) + [0] * (BLOCK - len(bits_block))
    has = any(_nonfinite(b) for b in block)
    amax = max([(b & 0x7FFF) for b in block if not _nonfinite(b)] or [0])
    sb = scale_bytes(SCALAR, amax, has, fmt, mode)
    if has:
        return sb, [0x1F | ((b >> 15) & 1) << 5 for b in block]
    return sb, [encode_codes(SCALAR, b, sb - 127, fmt) for b in block]


# ---------------------------------------------------------------------------------------------
# Self-test: the spec's worked examples, then the integer expressions against the transcription

# (block values, format, {mode: (scale byte, leading codes)}) from docs/mxfp6-format.md.
WORKED = [
    ([0.0, -0.0], "E2M3", dict.fromkeys(MODES, (0x00, [0x00, 0x20]))),
    ([0.0, -0.0], "E3M2", dict.fromkeys(MODES, (0x00, [0x00, 0x20]))),
    ([7.5, -7.5, 1.0], "E2M3", dict.fromkeys(MODES, (0x7F, [0x1F, 0x3F, 0x08]))),
    ([7.5, -7.5, 1.0], "E3M2", {"FLOOR": (0x7D, [0x1F, 0x3F, 0x14]), "EVEN": (0x7E, [0x1C, 0x3C, 0x10]),
                                "RCEIL": (0x7E, [0x1C, 0x3C, 0x10])}),
    ([7.75, 1.0], "E2M3", {"FLOOR": (0x7F, [0x1F, 0x08]), "EVEN": (0x80, [0x18, 0x04]),
                           "RCEIL": (0x80, [0x18, 0x04])}),
    ([30.0, 1.0], "E3M2", {"FLOOR": (0x7F, [0x1F, 0x0C]), "EVEN": (0x80, [0x1C, 0x08]),
                           "RCEIL": (0x80, [0x1C, 0x08])}),
    ([1.0, 2.0 ** -20], "E2M3", dict.fromkeys(MODES, (0x7D, [0x18, 0x00]))),
    ([1.0, 2.0 ** -20], "E3M2", dict.fromkeys(MODES, (0x7B, [0x1C, 0x00]))),
]
PACKED = [([0x3F, 0, 0, 0], [0x3F, 0x00, 0x00]), ([0, 0x3F, 0, 0], [0xC0, 0x0F, 0x00]),
          ([1, 2, 3, 4], [0x81, 0x30, 0x10])]


def _check(cond, what, failures):
    if not cond:
        failures.append(what)


def self_test(stride=13, verbose=True):
    """Returns the list of failures (empty: all good)."""
    failures = []
    # 1. Worked examples, through both implementations, and their packing.
    for values, fmt, modes in WORKED:
        bits = [bf16_bits(v) for v in values]
        for mode, (want_scale, want_codes) in modes.items():
            for name, enc in (("spec", encode_block_spec), ("integer", encode_block_ns)):
                sb, codes = enc(bits, fmt, mode)
                n = len(want_codes)
                _check(sb == want_scale and codes[:n] == want_codes and all(c == 0 for c in codes[n:]),
                       f"{name} {values} {fmt} {mode}: got {sb:02X}; {' '.join(f'{c:02X}' for c in codes[:n])}, "
                       f"want {want_scale:02X}; {' '.join(f'{c:02X}' for c in want_codes)}", failures)
    for codes, want in PACKED:
        w = pack_words(*codes)
        _check(pack4_spec(*codes) == want and [w & 0xFF, (w >> 8) & 0xFF, (w >> 16) & 0xFF] == want,
               f"pack {codes}: want {want}", failures)
    # 2. Blocks the spec singles out: NaN/Inf -> 0xFF and sign|0x1F; subnormal amax -> 0x00.
    for fmt in FORMATS:
        for mode in MODES:
            for name, enc in (("spec", encode_block_spec), ("integer", encode_block_ns)):
                sb, codes = enc([bf16_bits(1.0), 0x7FC1, bf16_bits(-2.0), 0xFF80], fmt, mode)
                _check(sb == 0xFF and codes[:4] == [0x1F, 0x1F, 0x3F, 0x3F] and codes[4] == 0x1F,
                       f"{name} NaN/Inf block {fmt} {mode}: {sb:02X} {codes[:5]}", failures)
                sb, codes = enc([0x0001, 0x807F], fmt, mode)
                _check(sb == 0x00, f"{name} subnormal amax {fmt} {mode}: scale {sb:02X}", failures)
    # 3. Scale bytes of every finite amax, every format and mode: integer == transcription, and a
    #    finite amax never yields 0xFE/0xFF.
    for fmt in FORMATS:
        for mode in MODES:
            for amax in range(0, 0x7F80):
                got, want = scale_bytes(SCALAR, amax, False, fmt, mode), scale_byte_spec(amax, False, fmt, mode)
                if got != want or want >= 0xFE:
                    failures.append(f"scale {fmt} {mode} amax {amax:04X}: integer {got:02X}, spec {want:02X}")
                    break
    #    The constants RC and EV against what the spec says they mean, exactly: RCEIL's s is
    #    ceil(log2(amax / max_elem)); EVEN adds 1 to FLOOR exactly when FLOOR saturates (amax / 2^s
    #    in [7.75, 8) for E2M3, [30, 32) for E3M2).
    max_elem = {"E2M3": fractions.Fraction(15, 2), "E3M2": fractions.Fraction(28)}
    saturates = {"E2M3": fractions.Fraction(31, 4), "E3M2": fractions.Fraction(30)}
    for fmt in FORMATS:
        for amax in range(0x0080, 0x7F80, 3):
            a = bf16_value(amax)
            floor_s = ((amax >> 7) - 127) - FORMATS[fmt][0]
            rceil_s = floor_s if a <= max_elem[fmt] * fractions.Fraction(2) ** floor_s else floor_s + 1
            even_s = floor_s + (1 if a >= saturates[fmt] * fractions.Fraction(2) ** floor_s else 0)
            for mode, want_s in (("RCEIL", rceil_s), ("EVEN", even_s)):
                want = max(-127, min(127, want_s)) + 127
                if scale_byte_spec(amax, False, fmt, mode) != want:
                    failures.append(f"scale {fmt} {mode} amax {amax:04X}: {scale_byte_spec(amax, False, fmt, mode):02X}, "
                                    f"by definition {want:02X}")
                    break
    # 4. Element codes: every `stride`-th bf16 pattern (both signs, all exponents, subnormals)
    #    under scale exponents across the range, integer == transcription.
    exps = (-127, -126, -120, -30, -7, -3, -2, -1, 0, 1, 2, 3, 5, 20, 60, 120, 126, 127)
    checked = 0
    for fmt in FORMATS:
        bad = 0
        for b in range(0, 1 << 16, stride):
            if _nonfinite(b):
                continue
            x = bf16_value(b)
            for s in exps:
                got = encode_codes(SCALAR, b, s, fmt)
                want = encode_spec(x * fractions.Fraction(2) ** -s, (b >> 15) & 1, fmt)
                checked += 1
                if got != want:
                    bad += 1
                    if bad <= 5:
                        failures.append(f"encode {fmt} bits {b:04X} s {s}: integer {got:02X}, spec {want:02X}")
    if verbose:
        print(f"mxfp6_spec self-test: {len(WORKED)} worked blocks x modes, {len(PACKED)} packings, "
              f"special blocks, {2 * 3 * 0x7F80} scales, {checked} element codes: "
              f"{'ok' if not failures else f'{len(failures)} FAILED'}")
        for f in failures[:20]:
            print("  FAIL", f)
    return failures


if __name__ == "__main__":
    sys.exit(1 if self_test() else 0)
