"""The ops as torch.library custom ops (torch >= 2.4), so torch.compile treats them as opaque:
a fake implementation gives the outputs' shapes, and autograd is registered. Without torch, or
with an older one, `registered` is False and the ops launch directly (eager only).

The backward kernels are not wired here yet: a backward through these ops raises, never returns a
wrong gradient.
"""

registered = False

try:
    import torch
    _version = tuple(int(p) for p in torch.__version__.split("+")[0].split(".")[:2])
    _available = _version >= (2, 4) and hasattr(torch, "library") and hasattr(torch.library, "custom_op")
except ImportError:
    torch = None
    _available = False

if _available:
    from typing import Optional, Tuple

    from torch import Tensor

    from . import _client, _ops

    @torch.library.custom_op("mxfp6::norm_rope_qkv_fwd", mutates_args=())
    def norm_rope_fwd(mixed_qkv: Tensor, q_weight: Tensor, k_weight: Tensor, cos: Tensor, sin: Tensor,
                      k_cos: Optional[Tensor], k_sin: Optional[Tensor], layout: str, pos_div: int,
                      eps: float) -> Tuple[Tensor, Tensor, Tensor, Tensor, Tensor]:
        call, out = _ops.norm_rope_call(mixed_qkv, q_weight, k_weight, cos, sin, k_cos, k_sin, layout, pos_div, eps)
        call.launch(_client.connection(), mixed_qkv.device)
        return tuple(out)

    @norm_rope_fwd.register_fake
    def _(mixed_qkv, q_weight, k_weight, cos, sin, k_cos, k_sin, layout, pos_div, eps):
        T, H = mixed_qkv.shape[0], mixed_qkv.shape[1] // (3 * _ops.HEAD_DIM)
        qkv = [mixed_qkv.new_empty((T, H, _ops.HEAD_DIM)) for _ in range(3)]
        return tuple(qkv + [mixed_qkv.new_empty((T, H), dtype=torch.float32) for _ in range(2)])

    @torch.library.custom_op("mxfp6::ln_modulate_fwd", mutates_args=())
    def ln_modulate_fwd(x: Tensor, scale: Tensor, shift: Tensor, tokens_per_sample: int, layout: str,
                        eps: float) -> Tuple[Tensor, Tensor, Tensor]:
        call, out = _ops.ln_modulate_call(x, scale, shift, tokens_per_sample, layout, eps)
        call.launch(_client.connection(), x.device)
        return tuple(out)

    @ln_modulate_fwd.register_fake
    def _(x, scale, shift, tokens_per_sample, layout, eps):
        T = x.shape[0]
        return x.new_empty(x.shape), x.new_empty((T,), dtype=torch.float32), x.new_empty((T,), dtype=torch.float32)

    def _no_backward(name):
        def backward(ctx, *grads):
            raise NotImplementedError(f"mxfp6::{name}: the backward is not wired to its kernels yet")
        return backward

    def _save_nothing(ctx, inputs, output):
        pass

    norm_rope_fwd.register_autograd(_no_backward("norm_rope_qkv_fwd"), setup_context=_save_nothing)
    ln_modulate_fwd.register_autograd(_no_backward("ln_modulate_fwd"), setup_context=_save_nothing)
    registered = True
