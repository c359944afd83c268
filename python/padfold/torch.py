"""padfold for PyTorch: nn.Module layers whose padding follows the convention you name
(TensorFlow/Keras SAME by default), resolved once at construction from the fixed input size, and
run by a padfold kernel with the border folded in (no F.pad copy).

    conv = padfold.torch.Conv2d(3, 8, 3, stride=2, padding="same", convention="tensorflow",
                                input_size=(9, 11))
    y = conv(x)                      # x: (N, 3, 9, 11) float32 on the CPU

The weights are ordinary nn.Parameters named and shaped as nn.Conv2d's, so a state_dict moves
between the two. The kernel of each batch size is compiled on first use and kept in
$PADFOLD_CACHE_DIR (default ~/.cache/padfold). It runs as the custom op padfold::window, one op in
traces. Where it cannot run (another device, another dtype) the same result comes from F.pad and
the PyTorch op, with a warning; gradients always come from that path.
Tested with PyTorch 1.13 (Debian 12); newer versions from PyPI on an opt-in basis.
"""
import hashlib
import json
import math
import numbers
import os
import pathlib
import threading
import warnings
import weakref
from typing import Optional, Sequence, Tuple, Union

import torch
import torch.nn.functional as F
from torch import nn

import padfold

Size = Union[int, Sequence[int]]
_LETTERS = {1: "W", 2: "HW", 3: "DHW"}
_TORCH_MODES = ("reflect", "replicate", "circular")  # F.pad has these borders
_BORDERS = ("zeros", "constant", "reflect", "symmetric", "replicate", "circular")

_lib = torch.library.Library("padfold", "DEF")
_lib.define("window(Tensor x, Tensor? weight, Tensor? bias, str bundle, str layer) -> Tensor")

_bundles = {}
_bundles_lock = threading.Lock()


def _bundle(path: str) -> "padfold.Bundle":
    with _bundles_lock:
        b = _bundles.get(path)
        if b is None or b.closed:
            b = _bundles[path] = padfold.load(path)
        return b


def _window_cpu(x, weight, bias, bundle, layer):
    kernel = _bundle(bundle).layer(layer)
    buffers = {}
    if weight is not None:
        buffers["weights"] = weight.contiguous()
        # The layer's weights as the module holds them, where the kernel reads them prepared
        # (a trace passes the parameter): prepared for this call.
        raw = kernel.prepare.buffers[0]["shape"] if kernel.prepare else None
        if raw is not None and list(weight.shape) == list(raw):
            buffers["weights"] = kernel.prepare(buffers["weights"])
    if bias is not None:
        buffers["bias"] = bias.contiguous()
    return kernel(x.contiguous(), **buffers)


_lib.impl("window", _window_cpu, "CPU")


def _is_int(v) -> bool:
    return isinstance(v, numbers.Integral) and not isinstance(v, bool)


def _tuple(v: Size, dims: int, name: str, minimum: int = 1) -> Tuple[int, ...]:
    """v as `dims` ints >= minimum: an int for every axis or one per axis; a float, a bool or a
    value below minimum raises, naming the argument (nothing is rounded)."""
    values = (v,) * dims if _is_int(v) else tuple(v) if isinstance(v, (list, tuple)) else None
    if values is None or len(values) != dims or not all(_is_int(i) and i >= minimum
                                                        for i in values):
        raise ValueError(f"{name}: expected an int >= {minimum} or {dims} of them, got {v!r}")
    return tuple(int(i) for i in values)


def _count(v, name: str) -> int:
    return _tuple(v, 1, name)[0]


def _cache_dir() -> pathlib.Path:
    root = os.environ.get("PADFOLD_CACHE_DIR")
    return pathlib.Path(root) if root else pathlib.Path.home() / ".cache" / "padfold"


def _symmetric_index(n: int, before: int, after: int, device) -> torch.Tensor:
    """The input index of each padded position for numpy's 'symmetric' (edge repeated), which
    F.pad lacks; before and after are at most n (padfold's validate_border)."""
    i = torch.arange(-before, n + after, device=device)
    return torch.where(i < 0, -1 - i, torch.where(i >= n, 2 * n - 1 - i, i))


class _Window(nn.Module):
    """A padfold layer of one op over `dims` spatial axes, channels first (N, C, ...)."""

    def __init__(self, op: str, dims: int, channels: int, kernel_size: Size, stride: Size,
                 padding, dilation: Size, convention: Optional[str], input_size: Size,
                 border: str, border_value: float, target: str):
        super().__init__()
        if input_size is None:
            raise ValueError("input_size: padfold resolves the padding for a fixed input size; "
                             f"give the {dims} spatial size(s), e.g. input_size=(224, 224)")
        if border not in _BORDERS:
            raise ValueError(f"border: {border!r}; expected one of {', '.join(_BORDERS)}")
        if not isinstance(border_value, (int, float)) or not math.isfinite(border_value):
            raise ValueError(f"border_value: expected a finite number, got {border_value!r}")
        self.op, self.dims, self.channels = op, dims, _count(channels, "channels")
        self.kernel_size = _tuple(kernel_size, dims, "kernel_size")
        self.stride = _tuple(stride, dims, "stride")
        self.dilation = _tuple(dilation, dims, "dilation")
        self.input_size = _tuple(input_size, dims, "input_size")
        self.padding, self.convention = padding, convention
        self.border, self.border_value, self.target = border, float(border_value), target
        pads = padfold.pads(self.input_size, self.kernel_size, self.stride, self.dilation,
                            padding, convention if padding == "same" else None,
                            ceil_mode=getattr(self, "ceil_mode", False))
        self.pads_before, self.pads_after, self.output_size = pads.before, pads.after, pads.output
        self._kernels = {}
        self._prepared = {}  # bundle dir -> (weakref to the weight, its version, prepared) or None

    def _layer(self) -> dict:
        layer = {"name": "layer", "op": self.op, "kernel": list(self.kernel_size),
                 "stride": list(self.stride), "dilation": list(self.dilation),
                 "padding": [*self.pads_before, *self.pads_after]}
        if self.border == "constant":
            layer["border"] = {"mode": "constant", "value": self.border_value}
        else:
            layer["border"] = self.border
        return layer

    def spec(self, batch: int) -> dict:
        """The padfold spec of this layer for a batch size (padfold.compile takes it)."""
        layer = self._layer()
        layer["input_shape"] = [batch, self.channels, *self.input_size]
        layout = "NC" + _LETTERS[self.dims]
        return {"model": f"torch_{self.op}", "defaults": {"layout": layout,
                                                          "weight_layout": "OI" + _LETTERS[self.dims]},
                "layers": [layer]}

    def kernel(self, batch: int) -> str:
        """Compiles (or finds in the cache) the bundle of a batch size; returns its directory."""
        path = self._kernels.get(batch)
        if path:
            return path
        spec = self.spec(batch)
        key = json.dumps([spec, self.target, padfold.__version__, "prepare_entry"], sort_keys=True)
        out = _cache_dir() / "torch" / hashlib.sha256(key.encode()).hexdigest()[:24]
        if not (out / "manifest.json").is_file():
            out.parent.mkdir(parents=True, exist_ok=True)
            padfold.compile(spec, self.target, out, fuse="none", prepare_entry=True).close()
        self._kernels[batch] = str(out)
        return str(out)

    def _kernel_weight(self, bundle: str, weight):
        """The weights the kernel of `bundle` reads: `weight` itself, or the form its prepare
        kernel writes from it (Winograd's transform, channel blocks), computed once per value.
        The values are compared with a copy on each call (one read of the weights; a change
        through .data moves no version counter), so a replaced or changed parameter
        (load_state_dict, an optimizer step, weight.data.copy_) is prepared again."""
        if weight is None:
            return None
        cached = self._prepared.get(bundle, ())
        if cached is None:
            return weight  # the kernel reads the weights as they are
        with torch.no_grad():
            if cached and cached[0]() is weight and torch.equal(weight, cached[1]):
                return cached[2]
            prepare = _bundle(bundle).layer("layer").prepare
            if prepare is None:
                self._prepared[bundle] = None
                return weight
            raw = weight.detach().contiguous().clone()
            self._prepared[bundle] = (weakref.ref(weight), raw, prepare(raw))
        return self._prepared[bundle][2]

    def _check_input(self, x: torch.Tensor):
        want = (self.channels, *self.input_size)
        if x.dim() != self.dims + 2 or tuple(x.shape[1:]) != want:
            raise ValueError(f"{type(self).__name__}: input of shape {tuple(x.shape)}; this layer "
                             f"was built for (N, {', '.join(map(str, want))}) (input_size is fixed: "
                             "the pads were resolved for it)")

    def _padded(self, x: torch.Tensor, fill: float) -> torch.Tensor:
        if self.border == "symmetric":
            for axis in range(self.dims):
                idx = _symmetric_index(x.shape[2 + axis], self.pads_before[axis],
                                       self.pads_after[axis], x.device)
                x = x.index_select(2 + axis, idx)
            return x
        pad = [p for b, a in zip(reversed(self.pads_before), reversed(self.pads_after))
               for p in (b, a)]  # F.pad's order: last dim first
        if self.border in _TORCH_MODES:
            return F.pad(x, pad, mode=self.border)
        return F.pad(x, pad, value=self.border_value if self.border == "constant" else fill)

    def _run(self, x, weight=None, bias=None):
        self._check_input(x)
        differentiable = torch.is_grad_enabled() and any(
            t is not None and t.requires_grad for t in (x, weight, bias))
        if x.device.type != "cpu" or x.dtype != torch.float32:
            warnings.warn(f"padfold.torch: no padfold kernel for a {x.dtype} tensor on "
                          f"{x.device}; computing the same result with F.pad and PyTorch")
            return self.reference(x, weight, bias)
        if differentiable:
            return _WithReferenceGradient.apply(self, x, weight, bias)
        bundle = self.kernel(int(x.shape[0]))
        if not torch.jit.is_tracing():  # a trace keeps the parameter, not a constant
            weight = self._kernel_weight(bundle, weight)
        return torch.ops.padfold.window(x, weight, bias, bundle, "layer")

    def reference(self, x, weight=None, bias=None):
        """The same layer through F.pad and PyTorch's own op (the fallback and the gradient)."""
        raise NotImplementedError

    def extra_repr(self):
        return (f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding!r}, "
                f"convention={self.convention!r}, input_size={self.input_size}, pads_before="
                f"{self.pads_before}, pads_after={self.pads_after}, border={self.border!r}")


class _WithReferenceGradient(torch.autograd.Function):
    @staticmethod
    def forward(ctx, module, x, weight, bias):
        ctx.module = module
        ctx.save_for_backward(x, weight, bias)
        bundle = module.kernel(int(x.shape[0]))
        weight = module._kernel_weight(bundle, weight)
        return torch.ops.padfold.window(x.detach(), None if weight is None else weight.detach(),
                                        None if bias is None else bias.detach(), bundle, "layer")

    @staticmethod
    def backward(ctx, grad):
        x, weight, bias = ctx.saved_tensors
        with torch.enable_grad():
            args = [t.detach().requires_grad_(t.requires_grad) if t is not None else None
                    for t in (x, weight, bias)]
            y = ctx.module.reference(*args)
            wrt = [t for t in args if t is not None and t.requires_grad]
            grads = iter(torch.autograd.grad(y, wrt, grad))
        return (None,) + tuple(next(grads) if t is not None and t.requires_grad else None
                               for t in args)


class _ConvNd(_Window):
    def __init__(self, dims, in_channels, out_channels, kernel_size, stride=1, padding="same",
                 dilation=1, groups=1, bias=True, *, convention="tensorflow", input_size=None,
                 border="zeros", border_value=0.0, target="host"):
        in_channels, out_channels = _count(in_channels, "in_channels"), _count(out_channels,
                                                                                "out_channels")
        groups = _count(groups, "groups")
        if in_channels % groups or out_channels % groups:
            raise ValueError(f"groups={groups} must divide in_channels={in_channels} and "
                             f"out_channels={out_channels}")
        super().__init__(f"conv{dims}d", dims, in_channels, kernel_size, stride, padding,
                         dilation, convention, input_size, border, border_value, target)
        self.in_channels, self.out_channels, self.groups = in_channels, out_channels, groups
        self.weight = nn.Parameter(torch.empty(out_channels, in_channels // groups,
                                               *self.kernel_size))
        self.bias = nn.Parameter(torch.empty(out_channels)) if bias else None
        self.reset_parameters()

    def reset_parameters(self):
        # As nn.ConvNd initializes its parameters.
        nn.init.kaiming_uniform_(self.weight, a=5 ** 0.5)
        if self.bias is not None:
            fan_in = self.weight[0].numel()
            bound = 1 / fan_in ** 0.5 if fan_in else 0
            nn.init.uniform_(self.bias, -bound, bound)

    def _layer(self):
        layer = super()._layer()
        layer.update(out_channels=self.out_channels, groups=self.groups,
                     bias=self.bias is not None)
        return layer

    def forward(self, x):
        return self._run(x, self.weight, self.bias)

    def reference(self, x, weight=None, bias=None):
        conv = {1: F.conv1d, 2: F.conv2d, 3: F.conv3d}[self.dims]
        return conv(self._padded(x, 0.0), weight, bias, self.stride, 0, self.dilation,
                    self.groups)


class Conv1d(_ConvNd):
    """nn.Conv1d with padfold's padding: padding='same' (with convention=...), 'valid', 'causal',
    or explicit pads; input_size=(L,) fixed; border zeros, constant (border_value), reflect,
    symmetric, replicate or circular."""

    def __init__(self, *args, **kwargs):
        super().__init__(1, *args, **kwargs)


class Conv2d(_ConvNd):
    """nn.Conv2d with padfold's padding: padding='same' with convention='tensorflow' (Keras
    SAME: the odd pixel after, for any stride), 'onnx_lower', 'pytorch', ...; 'valid'; or
    explicit pads. input_size=(H, W) is fixed. border: zeros, constant (border_value), reflect,
    symmetric, replicate, circular. Parameters as nn.Conv2d's (state_dict compatible)."""

    def __init__(self, *args, **kwargs):
        super().__init__(2, *args, **kwargs)


class Conv3d(_ConvNd):
    """nn.Conv3d with padfold's padding; input_size=(D, H, W) fixed (see Conv2d)."""

    def __init__(self, *args, **kwargs):
        super().__init__(3, *args, **kwargs)


class _PoolNd(_Window):
    def __init__(self, op, dims, channels, kernel_size, stride=None, padding="same", *,
                 convention="tensorflow", input_size=None, ceil_mode=False, border="zeros",
                 border_value=0.0, count_include_pad=False):
        self.ceil_mode = ceil_mode
        super().__init__(op, dims, channels, kernel_size,
                         kernel_size if stride is None else stride, padding, 1, convention,
                         input_size, border, border_value, "host")
        self.count_include_pad = count_include_pad

    def _layer(self):
        layer = super()._layer()
        layer.pop("dilation")
        layer["ceil_mode"] = self.ceil_mode
        if self.op == "avg_pool":
            layer["count_include_pad"] = self.count_include_pad
        return layer

    def forward(self, x):
        return self._run(x)


class MaxPool2d(_PoolNd):
    """A max pool with padfold's padding (TensorFlow SAME by default): padded taps never win;
    input_size=(H, W) fixed; channels is C of the (N, C, H, W) input."""

    def __init__(self, channels, kernel_size, stride=None, padding="same", **kwargs):
        super().__init__("max_pool", 2, channels, kernel_size, stride, padding, **kwargs)

    def reference(self, x, weight=None, bias=None):
        fill = float("-inf") if self.border == "zeros" else 0.0
        return F.max_pool2d(self._padded(x, fill), self.kernel_size, self.stride, 0,
                            ceil_mode=self.ceil_mode)


class AvgPool2d(_PoolNd):
    """An average pool with padfold's padding (TensorFlow SAME by default); count_include_pad
    False averages the real taps only, as Keras does; input_size=(H, W) fixed."""

    def __init__(self, channels, kernel_size, stride=None, padding="same", **kwargs):
        super().__init__("avg_pool", 2, channels, kernel_size, stride, padding, **kwargs)

    def reference(self, x, weight=None, bias=None):
        pool = lambda t: F.avg_pool2d(t, self.kernel_size, self.stride, 0,
                                      ceil_mode=self.ceil_mode, divisor_override=1)
        ones = torch.ones_like(x)
        # Zero padding without count_include_pad averages the real taps; every other pool counts
        # the padded ones too.
        real_only = self.border == "zeros" and not self.count_include_pad
        count = pool(self._padded(ones, 0.0) if real_only else torch.ones_like(self._padded(x, 0.0)))
        return pool(self._padded(x, 0.0)) / count


def from_onnx(model, inputs=None) -> nn.Module:
    """The plain PyTorch module of a whole model (an .onnx file or a padfold spec), as `padfold
    port --emit` writes it: torch's own Conv/Pool modules with every pad resolved at the model's
    fixed input size (inputs= gives dynamic ONNX inputs' sizes), F.pad where the pads are
    asymmetric or the border is not zeros, and the model's weights loaded. It computes what the
    source model computes; padfold.port(model) says layer by layer why. It does not use padfold's
    kernels (padfold.compile does)."""
    import importlib.util
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "ported.py")
        padfold._core.port_json(os.fspath(model), "pytorch", padfold._bundle._input_sizes(inputs),
                                path)
        spec = importlib.util.spec_from_file_location("padfold_ported", path)
        ported = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(ported)
        return ported.Model()  # reads the weights now, before the folder goes


__all__ = ["AvgPool2d", "Conv1d", "Conv2d", "Conv3d", "MaxPool2d", "from_onnx"]
