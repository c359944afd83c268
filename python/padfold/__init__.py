"""padfold: convolution and pooling kernels whose padding is resolved once, statically, by the
rules of the framework you name, and folded into the kernel (no padded copy).

    >>> import padfold
    >>> padfold.pads(input=7, kernel=4, stride=2, padding="same", convention="tensorflow")
    Pads(before=(1,), after=(2,), output=(4,), mode='same_upper', asymmetric=True, ...)
    >>> bundle = padfold.compile("examples/tiny.json")          # a spec file, dict or .onnx
    >>> y = bundle.layer("stem")(x, weights=w, bias=b)          # NumPy or PyTorch CPU tensors
    >>> y = bundle.model()(x)                                   # the whole model

padfold.torch (imported on demand) has nn.Module layers with TensorFlow-exact SAME padding, and
padfold.torch.from_onnx(path) the plain PyTorch module of a whole model (padfold.port explains it).
"""
import pathlib as _pathlib

from . import _core
from ._bundle import Bundle, Layer, Model, Pool, compile, import_onnx, load
from ._pads import Pads, compare, pads
from ._port import port
from ._resize import resize

__version__ = _core.__version__
Error = _core.Error
TensorError = _core.TensorError

# The runtime sources and headers every bundle carries, installed beside this package's program.
_core.set_data_dir(str(_pathlib.Path(__file__).parent / "share" / "padfold"))


def host():
    """This machine as Halide names it, and its CPU flags."""
    return _core.host()


__all__ = ["Bundle", "Error", "Layer", "Model", "Pads", "Pool", "TensorError", "__version__", "compare",
           "compile", "host", "import_onnx", "load", "pads", "port", "resize"]
