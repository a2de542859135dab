"""Fixtures of the troupe Python tests: small models built in Python, the troupe CLI (the C++
path the Python results must equal), and torchvision models exported at test time."""
import os
import pathlib
import subprocess
import sys

import numpy as np
import pytest

import troupe

SOURCE_DIR = pathlib.Path(os.environ.get("TROUPE_SOURCE_DIR",
                                         pathlib.Path(__file__).resolve().parents[2]))

# ONNX data types for Cast's `to` attribute.
ONNX_TYPE = {troupe.Type.f32: 1, troupe.Type.u8: 2, troupe.Type.i8: 3, troupe.Type.u16: 4,
             troupe.Type.i16: 5, troupe.Type.i32: 6, troupe.Type.i64: 7, troupe.Type.boolean: 9,
             troupe.Type.f16: 10, troupe.Type.f64: 11, troupe.Type.u32: 12, troupe.Type.u64: 13,
             troupe.Type.bf16: 16}


def mlp_model(inputs=16, hidden=32, outputs=4, batch=1, seed=0):
    """x[batch, inputs] -> Relu(x @ w1 + b1) @ w2 -> y, seeded weights."""
    rng = np.random.default_rng(seed)
    b = troupe.ModelBuilder("mlp")
    x = b.input("x", troupe.Type.f32, [batch, inputs])
    w1 = b.constant("w1", rng.standard_normal((inputs, hidden)).astype(np.float32))
    b1 = b.constant("b1", rng.standard_normal((hidden,)).astype(np.float32))
    w2 = b.constant("w2", rng.standard_normal((hidden, outputs)).astype(np.float32))
    h = b.op("Relu", [b.op("Add", [b.op("MatMul", [x, w1]), b1])])
    b.output(b.op("MatMul", [h, w2]), "y")
    return b.build()


def mlp_reference(x, seed=0, inputs=16, hidden=32, outputs=4):
    rng = np.random.default_rng(seed)
    w1 = rng.standard_normal((inputs, hidden)).astype(np.float32)
    b1 = rng.standard_normal((hidden,)).astype(np.float32)
    w2 = rng.standard_normal((hidden, outputs)).astype(np.float32)
    return np.maximum(x @ w1 + b1, 0) @ w2


def identity_model(element_type, shape=(2, 3)):
    """y = Cast(x, to=the same type): a model whose input and output have `element_type`."""
    b = troupe.ModelBuilder("identity")
    x = b.input("x", element_type, list(shape))
    b.output(b.op("Cast", [x], {"to": ONNX_TYPE[element_type]}), "y")
    return b.build()


@pytest.fixture(scope="session")
def core():
    return troupe.Core()


@pytest.fixture(scope="session")
def mlp(core):
    return core.compile_model(mlp_model(), "CPU")


@pytest.fixture(scope="session")
def troupe_bin():
    path = os.environ.get("TROUPE_BIN")
    if not path:
        pytest.skip("TROUPE_BIN (the troupe CLI) is not set; ctest sets it")
    return path


@pytest.fixture(scope="session")
def torch_models(tmp_path_factory):
    """The reduced torchvision models of benchmarks/models/export_models.py (seeded random weights,
    nothing downloaded): DIR/NAME.onnx, DIR/NAME/inputs/input.npy, DIR/NAME/expected/output.npy."""
    out = tmp_path_factory.mktemp("torch_models")
    subprocess.run([sys.executable, str(SOURCE_DIR / "benchmarks/models/export_models.py"),
                    str(out), "--reduced", "--only", "resnet50", "mobilenet_v2"], check=True,
                   stdout=subprocess.DEVNULL)
    return out
