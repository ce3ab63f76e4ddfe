"""Autograd for the ops, two ways over the same launches:

- eager (the common case): a torch.autograd.Function per op, whose forward and backward launch
  through the C ABI directly; cheapest on the host.
- under torch.compile (torch >= 2.4): torch.library custom ops (forward and backward each one
  opaque op, with fake implementations giving the outputs' shapes) and register_autograd, so the
  compiled graph holds them without graph breaks or recompiles across steps.

Whether a backward will follow is decided by the caller, before entering the op: grad mode on and
a differentiable input that requires grad. Forward-only calls go straight to the launch and save
nothing; inside the op the question cannot be answered (a custom op's forward sees grad mode off,
and ctx.needs_input_grad reads True even under no_grad).
"""

from . import _calls, _launch

try:
    import torch
    _version = tuple(int(p) for p in torch.__version__.split("+")[0].split(".")[:2])
    CUSTOM_OPS = _version >= (2, 4) and hasattr(torch, "library") and hasattr(torch.library, "custom_op")
except ImportError:  # the ops need torch; connect, prefetch and stats do not
    torch = None
    CUSTOM_OPS = False


def _compiling():
    compiler = getattr(torch, "compiler", None)
    return bool(compiler is not None and hasattr(compiler, "is_compiling") and compiler.is_compiling())


class Spec:
    """One differentiable op: its forward and backward launches and how autograd connects them.

    forward(*args) -> outputs; save(args, outputs) -> (tensors, extras); backward_args(saved,
    extras, grads) -> the backward's args; input_grads(backward outputs, extras) -> one gradient
    (or None) per forward argument. `differentiable`: the argument indices gradients flow to;
    `constants`: tensor arguments never differentiated (a caller asking for their gradient is
    refused, not given none).
    """

    def __init__(self, name, forward, forward_schema, forward_fake, backward, backward_schema, backward_fake, save,
                 backward_args, input_grads, differentiable, constants, non_differentiable_outputs):
        self.name, self.forward, self.backward = name, forward, backward
        self.save, self.backward_args, self.input_grads = save, backward_args, input_grads
        self.differentiable, self.constants = differentiable, constants
        self.function = _function(self, non_differentiable_outputs)
        self.forward_op = self.backward_op = None
        if CUSTOM_OPS:
            self.forward_op = torch.library.custom_op(f"mxfp6::{name}", forward, mutates_args=(),
                                                      schema=forward_schema)
            self.forward_op.register_fake(forward_fake)
            self.backward_op = torch.library.custom_op(f"mxfp6::{name}_backward", backward, mutates_args=(),
                                                       schema=backward_schema)
            self.backward_op.register_fake(backward_fake)
            self.forward_op.register_autograd(self._compiled_backward, setup_context=self._setup_context)

    def _setup_context(self, ctx, inputs, output):
        tensors, ctx.extras = self.save(inputs, output)
        ctx.save_for_backward(*tensors)

    def _compiled_backward(self, ctx, *grads):
        args = self.backward_args(ctx.saved_tensors, ctx.extras, grads)
        return self.input_grads(self.backward_op(*args), ctx.extras)

    def run(self, public, args):
        training = torch.is_grad_enabled() and any(
            getattr(args[i], "requires_grad", False) for i in self.differentiable)
        if training:
            for i, name in self.constants.items():
                if getattr(args[i], "requires_grad", False):
                    raise ValueError(f"mxfp6.{public}: argument '{name}' (a rotary table) requires grad, and the op "
                                     "does not differentiate it: detach it (it is a constant of the model)")
        if self.forward_op is not None and _compiling():
            return self.forward_op(*args)
        if not training:
            return self.forward(*args)
        return self.function.apply(*args)


def _function(spec, non_differentiable_outputs):
    if torch is None:
        return None

    def forward(ctx, *args):
        outputs = spec.forward(*args)
        tensors, ctx.extras = spec.save(args, outputs)
        ctx.save_for_backward(*tensors)
        ctx.mark_non_differentiable(*[outputs[i] for i in non_differentiable_outputs])
        return outputs

    def backward(ctx, *grads):
        return spec.input_grads(spec.backward(*spec.backward_args(ctx.saved_tensors, ctx.extras, grads)), ctx.extras)

    return type(f"mxfp6_{spec.name}", (torch.autograd.Function,),
                {"forward": staticmethod(forward), "backward": staticmethod(backward)})


_launched = _launch.launched


def _kernel_grad(g, shape, like):
    """A gradient as the backward kernels take it: contiguous, and zeros for an output the loss did
    not use (autograd may pass None for it)."""
    if g is None:
        return like.new_zeros(shape)
    return g.contiguous()


# whole-QKV norm+RoPE -----------------------------------------------------------------------

def _qkv_fake(mixed_qkv, q_weight, k_weight, cos, sin, k_cos, k_sin, layout, pos_div, eps):
    T, H = mixed_qkv.shape[0], mixed_qkv.shape[1] // (3 * _calls.HEAD_DIM)
    qkv = [mixed_qkv.new_empty((T, H, _calls.HEAD_DIM)) for _ in range(3)]
    return tuple(qkv + [mixed_qkv.new_empty((T, H), dtype=torch.float32) for _ in range(2)])


def _qkv_bwd_fake(dq, dk, dv, mixed_qkv, *rest):
    T, C = mixed_qkv.shape
    row_stride = mixed_qkv.stride()[0] if T > 1 else C  # the real op's: mixed_qkv's (_calls._dqkv)
    return mixed_qkv.new_empty_strided((T, C), (row_stride, 1)), \
        mixed_qkv.new_empty((2, _calls.HEAD_DIM), dtype=torch.float32)


def _qkv_save(args, out):
    mixed_qkv, q_weight, k_weight, cos, sin, k_cos, k_sin, layout, pos_div, _ = args
    extras = {"layout": layout, "pos_div": pos_div, "dtypes": (q_weight.dtype, k_weight.dtype)}
    return (mixed_qkv, q_weight, k_weight, cos, sin, k_cos, k_sin, out[3], out[4]), extras


def _qkv_backward_args(saved, extras, grads):
    mixed_qkv, q_weight, k_weight, cos, sin, k_cos, k_sin, q_rstd, k_rstd = saved
    rows = (mixed_qkv.shape[0], mixed_qkv.shape[1] // (3 * _calls.HEAD_DIM), _calls.HEAD_DIM)
    dq, dk, dv = (_kernel_grad(g, rows, mixed_qkv) for g in grads[:3])
    return (dq, dk, dv, mixed_qkv, q_weight, k_weight, cos, sin, k_cos, k_sin, q_rstd, k_rstd, extras["layout"],
            extras["pos_div"])


def _qkv_input_grads(out, extras):
    dqkv, dw = out
    return (dqkv, dw[0].to(extras["dtypes"][0]), dw[1].to(extras["dtypes"][1])) + (None,) * 7


_QKV_ARGS = ("Tensor mixed_qkv, Tensor q_weight, Tensor k_weight, Tensor cos, Tensor sin, Tensor? k_cos, "
             "Tensor? k_sin")
NORM_ROPE_QKV = Spec(
    "norm_rope_qkv",
    _launched(_calls.qkv_fwd), f"({_QKV_ARGS}, str layout, int pos_div, float eps) -> (Tensor, Tensor, Tensor, "
                               "Tensor, Tensor)", _qkv_fake,
    _launched(_calls.qkv_bwd),
    f"(Tensor dq, Tensor dk, Tensor dv, {_QKV_ARGS}, Tensor q_rstd, Tensor k_rstd, str layout, int pos_div) -> "
    "(Tensor, Tensor)", _qkv_bwd_fake,
    _qkv_save, _qkv_backward_args, _qkv_input_grads, differentiable=(0, 1, 2),
    constants={3: "cos", 4: "sin", 5: "k_cos", 6: "k_sin"},
    non_differentiable_outputs=(3, 4)) if torch is not None else None


class PackedGrad:
    """Asks norm_rope's backward for d(mixed_qkv) packed to MXFP6 along rows and columns (the
    packer prologue, one fused pass), for a backward GEMM that takes packed operands. After the
    backward, `row_data`, `row_scales`, `col_data` and `col_scales` hold the blobs
    (docs/mxfp6-format.md) of d(mixed_qkv) [T, C = 3*H*128]; T must be a multiple of 32.

    with_bf16=True: the bf16 d(mixed_qkv) is also written and flows to mixed_qkv's gradient as
    usual. with_bf16=False: only the blobs are written, so mixed_qkv must not require grad (the
    caller's own backward consumes the blobs); asking otherwise is refused at the forward, since
    autograd would take a missing gradient for zero.

    Eager mode and CUDA graphs; under torch.compile the forward refuses it (a backward that writes
    into tensors made in the forward is not something the compiled graph can hold).
    """

    def __init__(self, fmt="E3M2", mode="RCEIL", with_bf16=True):
        _calls._choice("norm_rope", "fmt", fmt, _calls.FORMATS)
        _calls._choice("norm_rope", "mode", mode, _calls.MODES)
        self.fmt, self.mode, self.with_bf16 = fmt, mode, bool(with_bf16)
        self.row_data = self.row_scales = self.col_data = self.col_scales = None
        self.filled = False

    def allocate(self, T, C, device):
        import torch as t
        if T % 32 != 0:
            _calls.fail("norm_rope", f"packed_grad needs the tokens of 'mixed_qkv' to be a multiple of 32, got {T}")
        blobs = [t.empty(s, dtype=t.uint8, device=device) for _, s in _calls.packed_shapes(T, C, "dual")]
        self.row_data, self.row_scales, self.col_data, self.col_scales = blobs
        self.filled = False
        return blobs


def _qkv_packed_function():
    if torch is None:
        return None

    def forward(ctx, holder, *args):
        outputs = NORM_ROPE_QKV.forward(*args)
        tensors, ctx.extras = _qkv_save(args, outputs)
        ctx.save_for_backward(*tensors)
        ctx.holder = holder
        ctx.mark_non_differentiable(outputs[3], outputs[4])
        return outputs

    def backward(ctx, *grads):
        holder = ctx.holder
        bargs = _qkv_backward_args(ctx.saved_tensors, ctx.extras, grads)
        blobs = (holder.row_data, holder.row_scales, holder.col_data, holder.col_scales)
        call, out = _calls.qkv_bwd_pack(*bargs, holder.fmt, holder.mode, holder.with_bf16, blobs)
        call.launch(bargs[3].device)
        holder.filled = True
        dqkv = out[1] if holder.with_bf16 else None
        dw = out[0]
        return (None, dqkv, dw[0].to(ctx.extras["dtypes"][0]), dw[1].to(ctx.extras["dtypes"][1])) + (None,) * 7

    return type("mxfp6_norm_rope_qkv_packed", (torch.autograd.Function,),
                {"forward": staticmethod(forward), "backward": staticmethod(backward)})


NORM_ROPE_QKV_PACKED = _qkv_packed_function()


# per-tensor norm+RoPE ----------------------------------------------------------------------

def _heads_fake(x, weight, cos, sin, pos_div, eps):
    return x.new_empty((x.shape[0], x.shape[1], _calls.HEAD_DIM)), x.new_empty((x.shape[0], x.shape[1]),
                                                                                 dtype=torch.float32)


def _heads_bwd_fake(dy, x, weight, cos, sin, rstd, pos_div):
    return x.new_empty(tuple(x.shape)), x.new_empty((_calls.HEAD_DIM,), dtype=torch.float32)


NORM_ROPE_HEADS = Spec(
    "norm_rope_heads",
    _launched(_calls.heads_fwd), "(Tensor x, Tensor weight, Tensor cos, Tensor sin, int pos_div, float eps) -> "
                                 "(Tensor, Tensor)", _heads_fake,
    _launched(_calls.heads_bwd), "(Tensor dy, Tensor x, Tensor weight, Tensor cos, Tensor sin, Tensor rstd, "
                                 "int pos_div) -> (Tensor, Tensor)", _heads_bwd_fake,
    lambda a, out: ((a[0], a[1], a[2], a[3], out[1]), {"pos_div": a[4], "dtype": a[1].dtype}),
    lambda s, e, g: (_kernel_grad(g[0], (s[0].shape[0], s[0].shape[1], _calls.HEAD_DIM), s[0]), s[0], s[1], s[2], s[3],
                     s[4], e["pos_div"]),
    lambda out, e: (out[0], out[1].to(e["dtype"]), None, None, None, None),
    differentiable=(0, 1), constants={2: "cos", 3: "sin"}, non_differentiable_outputs=(1,)) if torch is not None else None


# LN-modulate -------------------------------------------------------------------------------

def _ln_fake(x, scale, shift, tokens_per_sample, layout, eps):
    T = x.shape[0]
    return x.new_empty(tuple(x.shape)), x.new_empty((T,), dtype=torch.float32), x.new_empty((T,), dtype=torch.float32)


def _ln_bwd_fake(g, x, scale, mean, rstd, tokens_per_sample, layout):
    return x.new_empty(tuple(x.shape)), scale.new_empty(tuple(scale.shape)), scale.new_empty(tuple(scale.shape))


def _per_token(n):
    """The builders take tokens_per_sample None for per-token modulation; the op schema takes 0."""
    return None if n == 0 else n


LN_MODULATE = Spec(
    "ln_modulate",
    _launched(lambda x, sc, sh, n, layout, eps: _calls.ln_fwd(x, sc, sh, _per_token(n), layout, eps)),
    "(Tensor x, Tensor scale, Tensor shift, int tokens_per_sample, str layout, float eps) -> (Tensor, Tensor, Tensor)",
    _ln_fake,
    _launched(lambda g, x, sc, m, r, n, layout: _calls.ln_bwd(g, x, sc, m, r, _per_token(n), layout)),
    "(Tensor g, Tensor x, Tensor scale, Tensor mean, Tensor rstd, int tokens_per_sample, str layout) -> "
    "(Tensor, Tensor, Tensor)", _ln_bwd_fake,
    lambda a, out: ((a[0], a[1], out[1], out[2]), {"n": a[3], "layout": a[4]}),
    lambda s, e, g: (_kernel_grad(g[0], tuple(s[0].shape), s[0]), s[0], s[1], s[2], s[3], e["n"], e["layout"]),
    lambda out, e: (out[0], out[1], out[2], None, None, None),
    differentiable=(0, 1, 2), constants={}, non_differentiable_outputs=(1, 2)) if torch is not None else None


# MXFP6 packers (not differentiable: blobs) ---------------------------------------------------

def _pack_fake(x, fmt, mode, along):
    return tuple(x.new_empty(s, dtype=torch.uint8) for _, s in _calls.packed_shapes(x.shape[0], x.shape[1], along))


_pack_launch = _launched(_calls.pack)
PACK_OP = None
if CUSTOM_OPS:
    PACK_OP = torch.library.custom_op("mxfp6::pack", lambda *a: list(_pack_launch(*a)), mutates_args=(),
                                      schema="(Tensor x, str fmt, str mode, str along) -> Tensor[]")
    PACK_OP.register_fake(lambda x, fmt, mode, along: list(_pack_fake(x, fmt, mode, along)))


def pack(x, fmt, mode, along):
    if PACK_OP is not None and _compiling():
        return tuple(PACK_OP(x, fmt, mode, along))
    return _pack_launch(x, fmt, mode, along)
