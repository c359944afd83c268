"""padfold.compile, padfold.load and what they return: a Bundle of kernels, each run on caller
memory (NumPy arrays or PyTorch CPU tensors) without a copy."""
import json
import os
import pathlib
import tempfile
from typing import Dict, Iterable, Optional, Sequence, Union

import numpy as np

from . import _core

PathLike = Union[str, os.PathLike]


def _is_torch(x) -> bool:
    return type(x).__module__.split(".")[0] == "torch"


def _as_arg(x):
    # A tensor that requires grad cannot leave through DLPack; its data can, without a copy.
    return x.detach() if _is_torch(x) and x.requires_grad else x


def _empty(desc: dict, like):
    shape = tuple(desc["shape"])
    if like is not None and _is_torch(like):
        import torch
        return torch.empty(shape, dtype=getattr(torch, desc["dtype"]))
    return np.empty(shape, dtype=desc["dtype"])


def _viewed(x, shape):
    """x seen in `shape` without a copy (the runtime writes through it), or x when that cannot
    be (then the runtime names what does not match)."""
    if tuple(getattr(x, "shape", ())) == shape:
        return x
    if _is_torch(x):
        try:
            return x.view(shape)
        except RuntimeError:
            return x
    if isinstance(x, np.ndarray):
        v = x.view()
        try:
            v.shape = shape  # raises where only a copy could reshape
        except (AttributeError, ValueError):
            return x
        return v
    return x


def _describe(desc: dict) -> str:
    return f"{desc['name']} ({desc['dtype']} {desc['layout']} {list(desc['shape'])})"


class Layer:
    """One kernel of a bundle: a layer, or a block of fused layers ("dw1+pw1").

    Call it with the input(s) positionally and the other buffers by name:
    ``y = layer(x, weights=w, bias=b)``; ``out=`` gives the output array to write (it is
    returned); otherwise one is allocated, a torch tensor when the inputs are torch tensors.
    Nothing is copied: an array whose dtype, shape or strides are not the kernel's raises
    padfold.TensorError naming the buffer, before anything runs.
    """

    def __init__(self, bundle: "Bundle", index: int):
        self._bundle = bundle
        self._index = index
        info = bundle._handle.kernel(index)
        self.name: str = info["layer"]
        self.op: str = info["op"]
        self.buffers = info["buffers"]  # dicts: name, role, dtype, layout, shape, strides
        prepare = bundle._handle.prepare_of(index) if index < bundle._handle.num_kernels() else -1
        # The layer that writes this one's weights in the form it reads them from the weights as
        # the spec lays them out (a bundle compiled with prepare_entry=True): run it once,
        # ``w = layer.prepare(raw)``, and pass ``weights=w`` on every call. None: this layer reads
        # the caller's weights as they are.
        self.prepare: Optional["Layer"] = Layer(bundle, prepare) if prepare >= 0 else None

    def __repr__(self):
        return f"<padfold.Layer {self.name} ({self.op}): " + ", ".join(
            _describe(b) for b in self.buffers) + ">"

    def __call__(self, *inputs, out=None, **buffers):
        ins = [b for b in self.buffers if b["role"] == "input"]
        outs = [b for b in self.buffers if b["role"] == "output"]
        if len(inputs) > len(ins):
            raise TypeError(f"layer '{self.name}' takes {len(ins)} input(s), got {len(inputs)}")
        given = dict(zip((b["name"] for b in ins), inputs))
        for name, value in buffers.items():
            if name in given:
                raise TypeError(f"layer '{self.name}': buffer '{name}' given twice")
            given[name] = value
        known = {b["name"] for b in self.buffers if b["role"] != "output"}
        for name in given:
            if name not in known:
                raise TypeError(f"layer '{self.name}' has no buffer '{name}'; it takes " +
                                ", ".join(_describe(b) for b in self.buffers
                                          if b["role"] != "output"))
        missing = [b for b in self.buffers if b["role"] != "output" and b["name"] not in given]
        if missing:
            raise TypeError(f"layer '{self.name}': missing " +
                            ", ".join(_describe(b) for b in missing))
        first = inputs[0] if inputs else next(iter(given.values()), None)
        outputs = _outputs(outs, out, first, f"layer '{self.name}'")
        self._bundle._handle.run_kernel(
            self._index, [(k, _as_arg(v)) for k, v in given.items()],
            [(b["name"], _as_arg(o)) for b, o in zip(outs, outputs)])
        return outputs[0] if len(outputs) == 1 else tuple(outputs)


def _outputs(descs, out, like, who):
    if out is None:
        return [_empty(d, like) for d in descs]
    outs = list(out) if isinstance(out, (list, tuple)) else [out]
    if len(outs) != len(descs):
        raise TypeError(f"{who} writes {len(descs)} output(s), out= gives {len(outs)}")
    return outs


class Model:
    """The bundle's whole model: ``y = model(x)`` runs every kernel in order, weights read from
    the bundle, intermediates allocated per run. Inputs bind by position or by name; ``out=``
    gives the output array(s). Several outputs come back as a tuple, in the order of
    ``outputs``."""

    def __init__(self, bundle: "Bundle"):
        self._bundle = bundle
        info = bundle._handle.model()
        self.arena_bytes: int = info["arena_bytes"]
        # An output read in another shape than its buffer's (an ONNX classifier's [N, K] for the
        # layer's [N, K, 1, 1]: the same values) is returned in that shape. An int8/uint8 input
        # or output says what its integers stand for: scale * (q - zero_point).
        graph = json.loads((bundle.dir / "manifest.json").read_text()).get("graph", {})
        views = graph.get("output_shapes", {})

        def quant(name):
            q = graph.get("quant", {}).get(name, {})
            return {k: q[k] for k in ("scale", "zero_point") if k in q}
        self.inputs = [dict(b, **quant(b["name"])) for b in info["inputs"]]
        self._buffer_shapes = [tuple(b["shape"]) for b in info["outputs"]]
        self.outputs = [dict(b, shape=views.get(b["name"], b["shape"]), **quant(b["name"]))
                        for b in info["outputs"]]

    def __repr__(self):
        return (f"<padfold.Model {self._bundle.model_name}: inputs " +
                ", ".join(_describe(b) for b in self.inputs) + "; outputs " +
                ", ".join(_describe(b) for b in self.outputs) + ">")

    def __call__(self, *inputs, out=None, **named):
        if len(inputs) > len(self.inputs):
            raise TypeError(f"model '{self._bundle.model_name}' takes {len(self.inputs)} "
                            f"input(s), got {len(inputs)}")
        given = dict(zip((b["name"] for b in self.inputs), inputs))
        for name, value in named.items():
            if name in given:
                raise TypeError(f"model input '{name}' given twice")
            given[name] = value
        first = inputs[0] if inputs else next(iter(given.values()), None)
        outputs = _outputs(self.outputs, out, first, f"model '{self._bundle.model_name}'")
        self._bundle._handle.run_model(
            [(k, _as_arg(v)) for k, v in given.items()],
            [(b["name"], _as_arg(_viewed(o, shape)))
             for b, o, shape in zip(self.outputs, outputs, self._buffer_shapes)])
        return outputs[0] if len(outputs) == 1 else tuple(outputs)


class Bundle:
    """A compiled bundle directory opened with the padfold runtime (the best target this CPU
    runs). ``bundle.layer(name)``, ``bundle.model()``, ``bundle.set_num_threads(n)``; close it
    (or use ``with``) to unload its library."""

    def __init__(self, dir: PathLike, cpu_flags: Optional[str] = None, *, reports=None,
                 _owned_dir=None):
        self._handle = _core.Bundle(os.fspath(dir), cpu_flags)
        self.dir = pathlib.Path(dir)
        self.reports = reports or []  # per kernel and target: schedule, compile time, size
        self._owned_dir = _owned_dir  # a temporary directory padfold.compile made
        self._model = None

    @property
    def target(self) -> str:
        """The Halide target the runtime chose for this CPU."""
        return self._handle.target

    @property
    def model_name(self) -> str:
        return self._handle.model_name

    @property
    def closed(self) -> bool:
        return self._handle.closed

    @property
    def layers(self):
        """The names of the bundle's kernels, in run order."""
        return [self._handle.kernel(i)["layer"] for i in range(self._handle.num_kernels())]

    def layer(self, name: str) -> Layer:
        return Layer(self, self._handle.find(name))

    def model(self) -> Model:
        if self._model is None or self._model._bundle is not self:
            self._model = Model(self)
        return self._model

    def set_num_threads(self, n: int) -> int:
        """Threads the kernels use (0: Halide's default, HL_NUM_THREADS or the cores). Returns
        the previous value. Process-wide for this bundle's library."""
        return self._handle.set_num_threads(n)

    def use_pool(self, pool: Optional["Pool"]) -> None:
        """Runs the kernels' parallel loops on ``pool`` (a :class:`Pool`), or on Halide's own
        pool again with ``None``. One pool serves a process: the last one installed."""
        self._handle.use_pool(None if pool is None else pool._handle)

    def close(self):
        self._handle.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __repr__(self):
        state = "closed" if self.closed else f"target {self.target}"
        return f"<padfold.Bundle {self.dir} ({state})>"


class Pool:
    """padfold's worker pool for the kernels' parallel loops: an idle worker spins ``spin_us``
    microseconds (None: 1000) after the last loop it saw, then sleeps, so that the kernels of a
    model run do not each wake the workers as Halide's pool makes them. A model run parks the
    workers when it returns; ``park()`` does it at any time. ``threads`` counts the caller's
    thread (0: the cores). ``bundle.use_pool(pool)`` puts a bundle's kernels on it."""

    def __init__(self, threads: int = 0, spin_us: Optional[int] = None):
        self._handle = _core.Pool(threads, -1 if spin_us is None else spin_us)

    @property
    def threads(self) -> int:
        return self._handle.threads

    def park(self) -> None:
        self._handle.park()

    def __repr__(self):
        return f"Pool(threads={self.threads})"


def load(dir: PathLike, cpu_flags: Optional[str] = None) -> Bundle:
    """Opens a bundle directory written by padfold compile."""
    return Bundle(dir, cpu_flags)


def _input_sizes(inputs: Optional[Dict[str, Sequence[int]]]):
    return [f"{k}={'x'.join(str(int(v)) for v in shape)}" for k, shape in (inputs or {}).items()]


def import_onnx(model: PathLike, out: PathLike, inputs: Optional[Dict[str, Sequence[int]]] = None,
                name: Optional[str] = None, layout: str = "auto", io_layout: str = "auto"):
    """padfold import: writes out/<model>.json, out/weights/ and out/import-report.json. layout:
    the layers' (auto: channels last, nchw, nhwc: padfold import --layout); io_layout: the model's
    inputs' and outputs' (auto: the model file's, nchw, nhwc: --io-layout). Returns (spec path,
    the import summary)."""
    return _core.import_onnx(os.fspath(model), os.fspath(out), _input_sizes(inputs), name or "",
                             layout, io_layout)


def compile(spec: Union[PathLike, dict], target: Union[str, Iterable[str]] = "host",
            out: Optional[PathLike] = None, *, fuse: str = "auto", jobs: int = 0,
            kernel_timeout: float = 600, schedules: Optional[PathLike] = None,
            db: Optional[PathLike] = None, db_any_machine: bool = False,
            embed_weights: bool = False, emit_stmt: bool = False,
            emit_device_code: bool = False, prepare_entry: bool = False, inputs: Optional[Dict[str, Sequence[int]]] = None,
            name: Optional[str] = None, layout: str = "auto", io_layout: str = "auto",
            cpu_flags: Optional[str] = None) -> Bundle:
    """padfold compile: a spec (a dict, a .json file) or an ONNX model (.onnx, imported first;
    inputs= gives the sizes of dynamic graph inputs, name= the model name, layout= the layout the
    layers compute in and io_layout= the inputs' and outputs', as padfold import --layout and
    --io-layout: by default channels last, the arrays in the model's own layout) -> an open
    Bundle.

    target: a Halide target or several, best first ("host", "x86-64-linux-avx2-fma",
    "host-cuda,host"). out: the bundle directory; None writes a temporary one, removed with the
    Bundle. The other options are padfold compile's. Errors raise padfold.Error with the CLI's
    message; nothing is left half-written.
    """
    targets = target if isinstance(target, str) else ",".join(target)
    owned = None
    if out is None:
        owned = tempfile.TemporaryDirectory(prefix="padfold-")
        out = pathlib.Path(owned.name) / "bundle"
    spec_path, spec_text = "", ""
    staging = None
    if isinstance(spec, dict):
        spec_text = json.dumps(spec)
    elif os.fspath(spec).endswith(".onnx"):
        staging = tempfile.TemporaryDirectory(prefix="padfold-import-")
        spec_path, _ = import_onnx(spec, pathlib.Path(staging.name) / "import", inputs, name,
                                   layout, io_layout)
    else:
        spec_path = os.fspath(spec)
    try:
        reports = _core.compile(spec_path, spec_text, os.fspath(out), targets, fuse, jobs,
                                float(kernel_timeout), os.fspath(schedules or ""),
                                os.fspath(db or ""), db_any_machine, embed_weights, emit_stmt,
                                emit_device_code, prepare_entry)
    finally:
        if staging is not None:
            staging.cleanup()
    return Bundle(out, cpu_flags, reports=reports, _owned_dir=owned)
