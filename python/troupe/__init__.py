"""troupe: a CPU inference engine whose compiled model is a pipeline of actors.

The API follows OpenVINO's Python API::

    import numpy as np
    import troupe

    core = troupe.Core()
    compiled = core.compile_model("model.onnx", "CPU", {troupe.properties.hint.performance_mode():
                                                       troupe.properties.hint.PerformanceMode.LATENCY})
    result = compiled({"input": np.zeros((1, 3, 224, 224), np.float32)})  # output name -> array

For many requests at once use ``compiled.create_infer_request()`` or an ``AsyncInferQueue``.
NumPy arrays that are C-contiguous, aligned and of a troupe dtype are read in place; bfloat16 has
no NumPy dtype and is exchanged as uint16 arrays holding the bits (see ``bf16_to_float32``).
Errors are ``troupe.Error`` subclasses naming what was wrong.
"""
from . import _troupe
from ._troupe import (
    AsyncInferQueue,
    Busy,
    Cancelled,
    ColorFormat,
    CompiledModel,
    Core,
    Error,
    ExecutionError,
    FormatError,
    InferRequest,
    InputInfo,
    InputTensorInfo,
    InvalidArgument,
    Layout,
    Model,
    ModelBuilder,
    ModelError,
    ModelInfo,
    Node,
    OutputInfo,
    OutputTensorInfo,
    PrePostProcessor,
    PreprocessSteps,
    ProfilingInfo,
    ProfilingStatus,
    QueueFull,
    RequestTimeout,
    ResizeAlgorithm,
    Tensor,
    TensorMismatch,
    Type,
    UnknownProperty,
    UnsupportedOperation,
    ValueInfo,
    save_model,
)
from . import properties

__version__ = _troupe.__version__


def bf16_to_float32(bits):
    """float32 values of bfloat16 numbers given as uint16 bits (troupe's view of bf16)."""
    import numpy as np
    bits = np.asarray(bits, dtype=np.uint16)
    return (bits.astype(np.uint32) << 16).view(np.float32)


def float32_to_bf16(values):
    """bfloat16 bits (uint16) of float32 values, rounded to nearest even as troupe rounds."""
    import numpy as np
    words = np.ascontiguousarray(values, dtype=np.float32).view(np.uint32).astype(np.uint64)
    rounded = (words + 0x7FFF + ((words >> 16) & 1)) >> 16
    nan = np.isnan(np.asarray(values, dtype=np.float32))
    out = rounded.astype(np.uint16)
    out[nan] = 0x7FC0
    return out


__all__ = [name for name in dir() if not name.startswith("_")]
