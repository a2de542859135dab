"""Starts `troupe serve` on free loopback ports for the Python client tests, and makes models."""
import json
import os
import pathlib
import signal
import subprocess
import time

import numpy as np

WIDTH = 16


def troupe_bin():
    path = os.environ.get("TROUPE_BIN")
    if not path:
        root = pathlib.Path(__file__).resolve().parents[2]
        path = str(root / "build" / "bin" / "troupe")
    return path


def write_add_model(path, bias=0.5, scale=2.0):
    """x f32 [N, 16] -> y = relu(x + bias), z = x * scale: exact in float32, so numpy is the
    reference bit for bit."""
    import onnx
    from onnx import TensorProto, helper

    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", WIDTH])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", WIDTH])
    z = helper.make_tensor_value_info("z", TensorProto.FLOAT, ["N", WIDTH])
    b = helper.make_tensor("b", TensorProto.FLOAT, [1, WIDTH], [bias] * WIDTH)
    s = helper.make_tensor("s", TensorProto.FLOAT, [1, WIDTH], [scale] * WIDTH)
    graph = helper.make_graph(
        [helper.make_node("Add", ["x", "b"], ["t"]), helper.make_node("Relu", ["t"], ["y"]),
         helper.make_node("Mul", ["x", "s"], ["z"])], "add", [x], [y, z], [b, s])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    pathlib.Path(path).parent.mkdir(parents=True, exist_ok=True)
    onnx.save(model, str(path))


def write_text_model(path):
    """words string [N] -> kept = StringNormalizer(words) without the stopword "the", upper-cased
    (an emptied row is one empty string)."""
    import onnx
    from onnx import TensorProto, helper

    words = helper.make_tensor_value_info("words", TensorProto.STRING, ["N"])
    kept = helper.make_tensor_value_info("kept", TensorProto.STRING, ["M"])
    graph = helper.make_graph(
        [helper.make_node("StringNormalizer", ["words"], ["kept"], case_change_action="UPPER",
                          stopwords=["the"])], "text", [words], [kept])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    pathlib.Path(path).parent.mkdir(parents=True, exist_ok=True)
    onnx.save(model, str(path))


def normalized(words):
    """What the text model answers for `words` (a list of str)."""
    kept = [w.upper() for w in words if w.lower() != "the"]
    return kept or [""]


def write_identity_chain_model(path, width=1024, depth=256):
    """x f32 [N, R, width] -> y = x @ I @ I ... (depth MatMuls with one identity weight): exact,
    so y == x bit for bit, and its cost grows with R: a large R holds the stream for a while."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", "R", width])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", "R", width])
    eye = numpy_helper.from_array(np.eye(width, dtype=np.float32), "eye")
    names = ["x"] + [f"t{i}" for i in range(depth - 1)] + ["y"]
    nodes = [helper.make_node("MatMul", [names[i], "eye"], [names[i + 1]]) for i in range(depth)]
    graph = helper.make_graph(nodes, "identity_chain", [x], [y], [eye])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    pathlib.Path(path).parent.mkdir(parents=True, exist_ok=True)
    onnx.save(model, str(path))


def expected(x, bias=0.5, scale=2.0):
    x = np.asarray(x, dtype=np.float32)
    return (np.maximum(x + np.float32(bias), np.float32(0)), x * np.float32(scale))


class Server:
    """A running `troupe serve`; stop() sends SIGTERM and returns the exit code."""

    def __init__(self, tmp_path, args, timeout=60):
        self.ready_file = pathlib.Path(tmp_path) / f"ready-{time.monotonic_ns()}.json"
        self.log = open(pathlib.Path(tmp_path) / "serve.log", "a+")
        self.proc = subprocess.Popen(
            [troupe_bin(), "serve", "--ready-file", str(self.ready_file)] + args,
            stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + timeout
        while not self.ready_file.exists():
            if self.proc.poll() is not None:
                raise RuntimeError(f"troupe serve exited {self.proc.returncode}: {self.output()}")
            if time.monotonic() > deadline:
                self.proc.kill()
                raise RuntimeError("troupe serve did not become ready: " + self.output())
            time.sleep(0.05)
        self.ports = json.loads(self.ready_file.read_text())

    def url(self, path="", scheme="http"):
        return f"{scheme}://127.0.0.1:{self.ports['http_port']}{path}"

    def output(self):
        self.log.flush()
        self.log.seek(0)
        return self.log.read()

    def stop(self, timeout=60):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            raise
