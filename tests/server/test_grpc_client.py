"""The KServe v2 gRPC API of `troupe serve` from a real client: Debian's python3-grpcio with stubs
generated at test time from server/grpc/grpc_service.proto by Debian's protoc and
grpc_python_plugin. Every RPC, a status per error code, raw and typed tensors, 64 concurrent calls
each getting its own outputs, TLS, SIGTERM under load (exit code 0)."""
import concurrent.futures
import importlib
import json
import pathlib
import subprocess
import sys
import time

import grpc
import numpy as np
import pytest

from serve_fixture import (Server, WIDTH, expected, normalized, write_add_model,
                           write_identity_chain_model, write_text_model)

ROOT = pathlib.Path(__file__).resolve().parents[2]
PROTO = ROOT / "server" / "grpc" / "grpc_service.proto"
TIMEOUT = 60  # seconds per call: a hung server fails the test instead of hanging it


@pytest.fixture(scope="module")
def pb(tmp_path_factory):
    """The generated modules, as (messages, services)."""
    out = tmp_path_factory.mktemp("stubs")
    subprocess.run(["protoc", f"-I{PROTO.parent}", f"--python_out={out}", f"--grpc_out={out}",
                    "--plugin=protoc-gen-grpc=/usr/bin/grpc_python_plugin", str(PROTO)],
                   check=True)
    sys.path.insert(0, str(out))
    try:
        return (importlib.import_module("grpc_service_pb2"),
                importlib.import_module("grpc_service_pb2_grpc"))
    finally:
        sys.path.remove(str(out))


def write_gather_model(path):
    """idx int64 [N] -> g = Gather(table f32 [4], idx): an out-of-range index fails the kernel."""
    import onnx
    from onnx import TensorProto, helper

    idx = helper.make_tensor_value_info("idx", TensorProto.INT64, ["N"])
    g = helper.make_tensor_value_info("g", TensorProto.FLOAT, ["N"])
    table = helper.make_tensor("table", TensorProto.FLOAT, [4], [10.0, 20.0, 30.0, 40.0])
    graph = helper.make_graph([helper.make_node("Gather", ["table", "idx"], ["g"], axis=0)],
                              "gather", [idx], [g], [table])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    onnx.save(model, str(path))


def write_half_model(path):
    """h fp16 [N] -> h_out = Identity(h)."""
    import onnx
    from onnx import TensorProto, helper

    h = helper.make_tensor_value_info("h", TensorProto.FLOAT16, ["N"])
    out = helper.make_tensor_value_info("h_out", TensorProto.FLOAT16, ["N"])
    graph = helper.make_graph([helper.make_node("Identity", ["h"], ["h_out"])], "half", [h], [out])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    onnx.save(model, str(path))


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    root = tmp_path_factory.mktemp("models")
    write_add_model(root / "add.onnx")
    write_gather_model(root / "gather.onnx")
    write_half_model(root / "half.onnx")
    write_text_model(root / "text.onnx")
    # A repository folder whose only model cannot load: it is known but never ready.
    (root / "repo" / "broken" / "1").mkdir(parents=True)
    (root / "repo" / "broken" / "1" / "model.onnx").write_bytes(b"\x08\x07garbage")
    return root


def serve_args(models, *extra):
    # The model actor refuses requests beyond 4 x MAX_REQUESTS_IN_FLIGHT waiting ("queue full",
    # UNAVAILABLE); the default (4 per stream) is too small for 64 calls at once.
    return ["-m", f"add={models / 'add.onnx'}", "-m", f"gather={models / 'gather.onnx'}",
            "-m", f"half={models / 'half.onnx'}", "-m", f"text={models / 'text.onnx'}",
            "--model-repository", str(models / "repo"),
            "--http-port", "-1", "--grpc-port", "0", "--metrics-port", "-1",
            "-p", "MAX_REQUESTS_IN_FLIGHT=64", *extra]


@pytest.fixture(scope="module")
def server(models, tmp_path_factory):
    s = Server(tmp_path_factory.mktemp("serve"), serve_args(models, "--max-body-mb", "1"))
    yield s
    assert s.stop() == 0, s.output()


def open_stub(pb, port, credentials=None, options=()):
    target = f"127.0.0.1:{port}"
    channel = (grpc.secure_channel(target, credentials, options) if credentials
               else grpc.insecure_channel(target, options))
    return channel, pb[1].GRPCInferenceServiceStub(channel)


@pytest.fixture(scope="module")
def stub(pb, server):
    channel, s = open_stub(pb, server.ports["grpc_port"])
    yield s
    channel.close()


def infer_request(pb, x, model="add", id="", outputs=()):
    request = pb[0].ModelInferRequest(model_name=model, id=id)
    request.inputs.add(name="x", datatype="FP32", shape=list(x.shape))
    request.raw_input_contents.append(np.ascontiguousarray(x, dtype="<f4").tobytes())
    for name in outputs:
        request.outputs.add(name=name)
    return request


def output_array(response, index):
    out = response.outputs[index]
    dtype = {"FP32": "<f4", "FP16": "<f2", "INT64": "<i8", "BOOL": "?"}[out.datatype]
    return np.frombuffer(response.raw_output_contents[index], dtype=dtype).reshape(out.shape)


def error_of(call, *args):
    with pytest.raises(grpc.RpcError) as info:
        call(*args, timeout=TIMEOUT)
    return info.value.code(), info.value.details()


def test_health(pb, stub):
    assert stub.ServerLive(pb[0].ServerLiveRequest(), timeout=TIMEOUT).live
    # A model that failed to load does not make the server unready (none is loading).
    assert stub.ServerReady(pb[0].ServerReadyRequest(), timeout=TIMEOUT).ready
    assert stub.ModelReady(pb[0].ModelReadyRequest(name="add"), timeout=TIMEOUT).ready
    assert stub.ModelReady(pb[0].ModelReadyRequest(name="add", version="1"), timeout=TIMEOUT).ready
    assert not stub.ModelReady(pb[0].ModelReadyRequest(name="broken"), timeout=TIMEOUT).ready
    code, details = error_of(stub.ModelReady, pb[0].ModelReadyRequest(name="nope"))
    assert code == grpc.StatusCode.NOT_FOUND and "nope" in details


def test_metadata(pb, stub):
    server = stub.ServerMetadata(pb[0].ServerMetadataRequest(), timeout=TIMEOUT)
    assert server.name == "troupe"
    assert server.version
    assert "binary_tensor_data" in server.extensions
    model = stub.ModelMetadata(pb[0].ModelMetadataRequest(name="add"), timeout=TIMEOUT)
    assert (model.name, list(model.versions), model.platform) == ("add", ["1"], "troupe_onnx")
    assert [(t.name, t.datatype, list(t.shape)) for t in model.inputs] == [("x", "FP32", [-1, WIDTH])]
    assert [(t.name, t.datatype, list(t.shape)) for t in model.outputs] == [
        ("y", "FP32", [-1, WIDTH]), ("z", "FP32", [-1, WIDTH])]
    half = stub.ModelMetadata(pb[0].ModelMetadataRequest(name="half", version="1"),
                              timeout=TIMEOUT)
    assert [(t.name, t.datatype) for t in half.inputs] == [("h", "FP16")]


def test_infer_raw_and_typed(pb, stub):
    x = np.random.default_rng(1).uniform(-2, 2, (3, WIDTH)).astype(np.float32)
    y, z = expected(x)
    response = stub.ModelInfer(infer_request(pb, x, id="raw-1"), timeout=TIMEOUT)
    assert (response.model_name, response.model_version, response.id) == ("add", "1", "raw-1")
    assert [o.name for o in response.outputs] == ["y", "z"]
    assert output_array(response, 0).tobytes() == y.tobytes()
    assert output_array(response, 1).tobytes() == z.tobytes()

    typed = pb[0].ModelInferRequest(model_name="add", model_version="1")
    typed.inputs.add(name="x", datatype="FP32", shape=[3, WIDTH]).contents.fp32_contents.extend(
        x.ravel().tolist())
    typed.outputs.add(name="z")
    response = stub.ModelInfer(typed, timeout=TIMEOUT)
    assert [o.name for o in response.outputs] == ["z"]
    assert output_array(response, 0).tobytes() == z.tobytes()


def test_infer_int64_and_fp16(pb, stub):
    request = pb[0].ModelInferRequest(model_name="gather")
    request.inputs.add(name="idx", datatype="INT64", shape=[3]).contents.int64_contents.extend(
        [3, 0, -1])
    response = stub.ModelInfer(request, timeout=TIMEOUT)
    assert output_array(response, 0).tolist() == [40.0, 10.0, 40.0]

    h = np.array([1.5, -2.0, 65504.0], dtype="<f2")
    request = pb[0].ModelInferRequest(model_name="half")
    request.inputs.add(name="h", datatype="FP16", shape=[3])
    request.raw_input_contents.append(h.tobytes())
    response = stub.ModelInfer(request, timeout=TIMEOUT)
    assert response.outputs[0].datatype == "FP16"
    assert output_array(response, 0).tobytes() == h.tobytes()


def test_infer_bytes_typed_and_raw(pb, stub):
    meta = stub.ModelMetadata(pb[0].ModelMetadataRequest(name="text"), timeout=TIMEOUT)
    assert [(t.name, t.datatype) for t in meta.inputs] == [("words", "BYTES")]
    words = ["The", "naïve", "x" * 300, "the", ""]
    request = pb[0].ModelInferRequest(model_name="text")
    request.inputs.add(name="words", datatype="BYTES", shape=[5]).contents.bytes_contents.extend(
        [w.encode() for w in words])
    response = stub.ModelInfer(request, timeout=TIMEOUT)
    assert response.outputs[0].datatype == "BYTES" and list(response.outputs[0].shape) == [3]
    raw = response.raw_output_contents[0]
    kept, at = [], 0
    while at < len(raw):  # each element: a 4-byte little-endian length, then its bytes
        length = int.from_bytes(raw[at:at + 4], "little")
        kept.append(raw[at + 4:at + 4 + length].decode())
        at += 4 + length
    assert kept == normalized(words)
    request = pb[0].ModelInferRequest(model_name="text")
    request.inputs.add(name="words", datatype="BYTES", shape=[2])
    request.raw_input_contents.append(b"".join(len(w).to_bytes(4, "little") + w
                                               for w in [b"the", b"end"]))
    response = stub.ModelInfer(request, timeout=TIMEOUT)
    assert response.raw_output_contents[0] == (3).to_bytes(4, "little") + b"END"
    request.raw_input_contents[0] = (9).to_bytes(4, "little") + b"short"
    code, details = error_of(stub.ModelInfer, request)
    assert code == grpc.StatusCode.INVALID_ARGUMENT and "'words'" in details, details


def bad_requests(pb):
    x = np.zeros((1, WIDTH), np.float32)
    unknown = infer_request(pb, x)
    unknown.inputs[0].name = "q"
    datatype = infer_request(pb, x)
    datatype.inputs[0].datatype = "BYTES"
    negative = infer_request(pb, x)
    negative.inputs[0].shape[0] = -1
    short = infer_request(pb, x)
    short.raw_input_contents[0] = b"\0" * 7
    both = infer_request(pb, x)
    both.inputs[0].contents.fp32_contents.append(1.0)
    half = pb[0].ModelInferRequest(model_name="half")
    half.inputs.add(name="h", datatype="FP16", shape=[1]).contents.fp32_contents.append(1.0)
    return [(pb[0].ModelInferRequest(model_name="add"), "'x'"),
            (unknown, "'q'"), (datatype, "string cannot be converted"), (negative, "negative"),
            (short, "7 bytes"), (both, "raw_input_contents"), (half, "raw_input_contents"),
            (infer_request(pb, x, outputs=["w"]), "'w'")]


def test_every_error_code(pb, stub):
    for request, fragment in bad_requests(pb):
        code, details = error_of(stub.ModelInfer, request)
        assert code == grpc.StatusCode.INVALID_ARGUMENT, details
        assert fragment in details, details

    x = np.zeros((1, WIDTH), np.float32)
    code, details = error_of(stub.ModelInfer, infer_request(pb, x, model="nope"))
    assert code == grpc.StatusCode.NOT_FOUND and "nope" in details
    code, _ = error_of(stub.ModelMetadata, pb[0].ModelMetadataRequest(name="add", version="9"))
    assert code == grpc.StatusCode.NOT_FOUND

    code, details = error_of(stub.ModelInfer, infer_request(pb, x, model="broken"))
    assert code == grpc.StatusCode.UNAVAILABLE and "broken" in details

    gather = pb[0].ModelInferRequest(model_name="gather")
    gather.inputs.add(name="idx", datatype="INT64", shape=[1]).contents.int64_contents.append(9)
    code, details = error_of(stub.ModelInfer, gather)
    assert code == grpc.StatusCode.INTERNAL and "out of range" in details

    # Over --max-body-mb: gRPC itself refuses the message.
    code, _ = error_of(stub.ModelInfer, infer_request(pb, np.zeros((20000, WIDTH), np.float32)))
    assert code == grpc.StatusCode.RESOURCE_EXHAUSTED

    # The server still answers.
    assert stub.ModelInfer(infer_request(pb, x), timeout=TIMEOUT).outputs


def test_64_concurrent_calls_get_their_own_outputs(pb, stub):
    rng = np.random.default_rng(64)
    inputs = [rng.uniform(-3, 3, (1 + i % 4, WIDTH)).astype(np.float32) for i in range(64)]
    futures = [stub.ModelInfer.future(infer_request(pb, x, id=str(i)), timeout=TIMEOUT)
               for i, x in enumerate(inputs)]
    for i, (x, future) in enumerate(zip(inputs, futures)):
        response = future.result()
        y, z = expected(x)
        assert response.id == str(i)
        assert output_array(response, 0).tobytes() == y.tobytes(), i
        assert output_array(response, 1).tobytes() == z.tobytes(), i


def test_tls(pb, models, tmp_path):
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
                    "-subj", "/CN=localhost", "-addext", "subjectAltName=DNS:localhost",
                    "-keyout", str(key), "-out", str(cert)], check=True, capture_output=True)
    s = Server(tmp_path, serve_args(models, "--tls-cert", str(cert), "--tls-key", str(key)))
    try:
        credentials = grpc.ssl_channel_credentials(root_certificates=cert.read_bytes())
        channel, secure = open_stub(pb, s.ports["grpc_port"], credentials,
                                    [("grpc.ssl_target_name_override", "localhost")])
        x = np.ones((2, WIDTH), np.float32)
        response = secure.ModelInfer(infer_request(pb, x), timeout=TIMEOUT)
        assert output_array(response, 0).tobytes() == expected(x)[0].tobytes()
        channel.close()
        plain_channel, plain = open_stub(pb, s.ports["grpc_port"])
        code, _ = error_of(plain.ServerLive, pb[0].ServerLiveRequest())
        assert code == grpc.StatusCode.UNAVAILABLE
        plain_channel.close()
    finally:
        assert s.stop() == 0, s.output()


def test_sigterm_under_load_answers_every_accepted_call(pb, models, tmp_path):
    s = Server(tmp_path, serve_args(models))
    channel, stub = open_stub(pb, s.ports["grpc_port"])
    rng = np.random.default_rng(7)
    inputs = [rng.uniform(-3, 3, (2, WIDTH)).astype(np.float32) for _ in range(200)]
    pool = concurrent.futures.ThreadPoolExecutor(16)

    def call(x):
        try:
            return x, stub.ModelInfer(infer_request(pb, x), timeout=TIMEOUT)
        except grpc.RpcError as e:
            return x, e

    futures = [pool.submit(call, x) for x in inputs]
    futures[20].result()  # under load
    # Calls answered before SIGTERM must all be answers; a call still in transit then may be
    # refused (futures[20] done does not mean that 16..19, started after 0..15, were accepted).
    answered_before = sum(1 for f in futures if f.done())
    exit_code = s.stop()
    ok = 0
    for future in futures:
        x, result = future.result()
        if isinstance(result, grpc.RpcError):
            # Refused, never failed or lost: UNAVAILABLE from the service once draining began or
            # from a closed port; CANCELLED from gRPC for a call that arrived as Shutdown began
            # and never reached the service (gRPC cancels calls not yet matched to a handler).
            assert result.code() in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.CANCELLED), \
                result.details()
        else:
            assert output_array(result, 0).tobytes() == expected(x)[0].tobytes()
            ok += 1
    pool.shutdown()
    channel.close()
    assert ok >= answered_before >= 1
    assert exit_code == 0, s.output()


def test_scheduling_over_grpc_priority_order_queue_full_and_timeouts(pb, tmp_path):
    """A served model's scheduler through ModelInfer's `priority` and `timeout` parameters
    (int64_param). One stream, one request per batch: while a large request holds the stream,
    two low-priority requests and then a high-priority one wait; the high one runs next (it
    completes before both low ones). A third low-priority request finds its level's queue full
    (UNAVAILABLE at once), a request whose timeout ends while it waits fails UNAVAILABLE 'timed
    out' without running, a priority beyond the levels is INVALID_ARGUMENT naming it, a negative
    or non-int64 parameter too. Every accepted request is answered bit-exact."""
    root = tmp_path / "repo"
    write_identity_chain_model(root / "chain" / "1" / "model.onnx")
    (root / "chain" / "config.json").write_text(json.dumps({
        "max_batch_size": 1, "priority_levels": 2, "default_priority_level": 2,
        "max_queue_size": 2, "allow_timeout_override": True, "NUM_STREAMS": 1}))
    s = Server(tmp_path, ["--model-repository", str(root), "--http-port", "-1", "--grpc-port", "0",
                          "--metrics-port", "-1", "--max-body-mb", "16"])
    channel, stub = open_stub(pb, s.ports["grpc_port"],
                              options=[("grpc.max_receive_message_length", 16 << 20)])
    try:
        def request(x, **parameters):
            r = pb[0].ModelInferRequest(model_name="chain")
            r.inputs.add(name="x", datatype="FP32", shape=list(x.shape))
            r.raw_input_contents.append(np.ascontiguousarray(x, dtype="<f4").tobytes())
            for key, value in parameters.items():
                if isinstance(value, int):
                    r.parameters[key].int64_param = value
                else:
                    r.parameters[key].string_param = value
            return r

        rng = np.random.default_rng(18)
        def small(i):
            return rng.uniform(-2, 2, (1, 1, 1024)).astype(np.float32) + np.float32(i)

        done_at = {}
        def start(name, x, **parameters):
            """Sends the call from this thread at once (a pool thread could start it late on a
            loaded machine, after requests sent later), and notes when its answer arrives."""
            future = stub.ModelInfer.future(request(x, **parameters), timeout=TIMEOUT)
            future.add_done_callback(lambda _: done_at.setdefault(name, time.monotonic()))
            return name, x, future

        def check(started):
            name, x, future = started
            response = future.result(timeout=TIMEOUT)
            y = np.frombuffer(response.raw_output_contents[0], "<f4").reshape(x.shape)
            assert y.tobytes() == x.tobytes(), name

        # Warm-up: the first run of a shape pays for kernel creation.
        check(start("warm", small(0)))
        # ~140 GFLOP in 1 MiB: it runs for 0.5-2 s on the CPUs CI meets, and arrives (gRPC
        # flow control) within the first ~100 ms.
        blocker = rng.uniform(-2, 2, (1, 256, 1024)).astype(np.float32)
        running = start("blocker", blocker, priority=1)
        time.sleep(0.2)
        lows = [start(f"low{i}", small(i), priority=2) for i in range(2)]
        time.sleep(0.05)
        high = start("high", small(9), priority=1)
        time.sleep(0.05)
        # Level 2 holds two waiting requests: a third is refused at once, i.e. while the
        # blocker still runs (no wall-clock bound: below the blocker's 0.5 s it would also
        # time a loaded machine's gRPC round trip).
        code, details = error_of(stub.ModelInfer, request(small(3), priority=2))
        assert code == grpc.StatusCode.UNAVAILABLE and "queue full" in details, details
        assert not running[2].done(), "the refusal waited for the running request"
        # Level 1 is not full: a request with a 20 ms timeout waits behind the blocker and
        # fails when its time is up, without running.
        code, details = error_of(stub.ModelInfer, request(small(4), priority=1,
                                                          timeout=20_000))
        assert code == grpc.StatusCode.UNAVAILABLE and "timed out" in details, details
        assert not running[2].done(), "the blocking request ended before the others queued"
        for started in [running, high] + lows:
            check(started)
        assert done_at["high"] < min(done_at["low0"], done_at["low1"]), done_at

        code, details = error_of(stub.ModelInfer, request(small(5), priority=3))
        assert code == grpc.StatusCode.INVALID_ARGUMENT and "priority 3" in details, details
        code, details = error_of(stub.ModelInfer, request(small(5), priority=-1))
        assert code == grpc.StatusCode.INVALID_ARGUMENT and "priority" in details, details
        code, details = error_of(stub.ModelInfer, request(small(5), timeout="soon"))
        assert code == grpc.StatusCode.INVALID_ARGUMENT and "timeout" in details, details
        # Still serving.
        check(start("after", small(6)))
    finally:
        channel.close()
        assert s.stop() == 0, s.output()
