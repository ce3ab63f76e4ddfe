"""mxfp6: MXFP6 training kernels as PyTorch ops, served by mxfp6-server or read from a kernel
database (docs/architecture.md, "The service").

    import mxfp6
    mxfp6.connect("grpc://10.0.0.5:50051,10.0.0.6:50051", cache_dir="/var/cache/mxfp6")
    # or mxfp6.connect("sqlite:///path/kernels.db")
    report = mxfp6.prefetch("shapes/flux12b-startup-b16.json")   # exact / nearest / default / pinned
    q, k, v = mxfp6.norm_rope(mixed_qkv, q_weight, k_weight, cos, sin)
    y = mxfp6.ln_modulate(x, scale, shift, tokens_per_sample=256)
    packed = mxfp6.pack(y, "E3M2", "RCEIL")      # rows, and columns too when training

Importable without torch (connect, prefetch and stats need none). The ops need torch; each has
autograd, and under torch.compile (torch >= 2.4) they are torch.library custom ops, opaque to the
compiler. MXFP6_PROFILE=DIR writes a Chrome trace of what ran (python/mxfp6/_profile.py).
"""

import os


def _checkout_root():
    """The checkout the package was built from (installed), or lives in (python/ of a checkout)."""
    try:
        from ._checkout import CHECKOUT
        return CHECKOUT
    except ImportError:
        here = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        return here if os.path.exists(os.path.join(here, "client", "mxfp6_client.h")) else None


from ._client import (ConnectError, Connection, PrefetchReport, ResolveError, ShapeWarning, connect,  # noqa: E402
                      connection, prefetch, stats)
from ._autograd import PackedGrad  # noqa: E402
from ._ops import Packed, ln_modulate, norm_rope, norm_rope_heads, pack  # noqa: E402

__all__ = ["ConnectError", "Connection", "PrefetchReport", "ResolveError", "ShapeWarning", "connect", "connection",
           "prefetch", "stats", "ln_modulate", "norm_rope", "norm_rope_heads", "pack", "Packed", "PackedGrad"]
