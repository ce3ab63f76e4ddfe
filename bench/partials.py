"""How the benchmark's plans reduce per-program fp32 partials: a tree of launches of one reduction
kernel (no torch, so the CPU smoke test checks it too)."""


def tree_chunks(partials, fan_in=32):
    """The run lengths of a fixed-order tree reduction of `partials` values: level i sums runs of
    chunks[i] consecutive values of the previous level (ascending), so the product of the chunks is
    `partials` and each level but the last has chunk <= fan_in. A partial count with no divisor in
    [4, fan_in] leaves the rest to the last level, one run of whatever is left."""
    chunks, left = [], partials
    while left > fan_in:
        chunk = max(d for d in range(1, fan_in + 1) if left % d == 0)
        if chunk < 4:
            break
        chunks.append(chunk)
        left //= chunk
    return chunks + [left]
