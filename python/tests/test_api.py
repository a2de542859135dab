"""Every call of the Python API: Core, CompiledModel, InferRequest, properties, errors,
ModelBuilder, PrePostProcessor, import/export."""
import io

import numpy as np
import pytest

import troupe
from troupe import properties as props

from conftest import mlp_model, mlp_reference


def test_core_devices_and_properties(core):
    assert core.available_devices == ["CPU"] or "CPU" in core.available_devices
    assert core.get_available_devices() == core.available_devices
    assert "onnx" in core.supported_model_formats
    supported = core.get_property("CPU", props.supported_properties())
    assert "PERF_COUNT" in supported
    assert isinstance(core.get_property("CPU", props.device.full_name()), str)
    other = troupe.Core()
    other.set_property("CPU", {props.enable_profiling(): True})
    assert other.get_property("CPU", "PERF_COUNT") is True
    other.set_property({props.enable_profiling(): False})
    assert other.get_property("CPU", "PERF_COUNT") is False


def test_property_names_follow_openvino():
    assert props.enable_profiling() == "PERF_COUNT"
    assert props.enable_profiling(True) == ("PERF_COUNT", True)
    assert props.hint.performance_mode() == "PERFORMANCE_HINT"
    assert props.streams.num() == "NUM_STREAMS"
    assert props.hint.inference_precision() == "INFERENCE_PRECISION_HINT"
    assert props.optimal_number_of_infer_requests() == "OPTIMAL_NUMBER_OF_INFER_REQUESTS"
    assert props.cache_dir() == "CACHE_DIR"


def test_compile_with_properties_dict(core):
    compiled = core.compile_model(mlp_model(), "CPU", {
        props.hint.performance_mode(): props.hint.PerformanceMode.THROUGHPUT,
        props.streams.num(): 2,
        props.enable_profiling(): True,
        props.hint.inference_precision(): troupe.Type.f32,
    })
    assert compiled.get_property("PERFORMANCE_HINT") == "THROUGHPUT"
    assert compiled.get_property(props.streams.num()) == 2
    assert compiled.get_property(props.model_name()) == "mlp"
    assert compiled.get_property(props.optimal_number_of_infer_requests()) >= 1
    assert compiled.get_property(props.loaded_from_cache()) is False
    request = compiled.create_infer_request()
    request.infer({"x": np.ones((1, 16), np.float32)})
    info = request.profiling_info
    assert [p.name for p in info[:5]] == ["1. input preprocessing", "2. input transfer to a device",
                                         "3. execution time", "4. output transfer from a device",
                                         "5. output postprocessing"]
    assert any(p.node_type == "MatMul" for p in info[5:])  # PERF_COUNT: per-node entries
    assert info[2].status == troupe.ProfilingStatus.EXECUTED
    assert request.get_profiling_info()[0].name == info[0].name


def test_compiled_model_ports(mlp):
    assert [i.name for i in mlp.inputs] == ["x"]
    assert mlp.input().shape == (1, 16)
    assert mlp.input("x").element_type == troupe.Type.f32
    assert mlp.input(0).dtype == np.float32
    assert mlp.output().get_any_name() == "y"
    assert mlp.outputs[0].shape == (1, 4)
    with pytest.raises(troupe.InvalidArgument, match="no input named 'nope'"):
        mlp.input("nope")


def test_call_infer_and_results(mlp):
    x = np.random.default_rng(1).standard_normal((1, 16)).astype(np.float32)
    out = mlp({"x": x})
    np.testing.assert_allclose(out["y"], mlp_reference(x), rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(mlp([x])["y"], out["y"])
    np.testing.assert_array_equal(mlp(x)["y"], out["y"])
    np.testing.assert_array_equal(mlp({0: x})["y"], out["y"])
    np.testing.assert_array_equal(mlp({mlp.input(): x})["y"], out["y"])
    request = mlp.create_infer_request()
    np.testing.assert_array_equal(request.infer({"x": x})["y"], out["y"])
    np.testing.assert_array_equal(request.results["y"], out["y"])
    np.testing.assert_array_equal(request.get_output_tensor(0).data, out["y"])
    np.testing.assert_array_equal(request.get_tensor("y").data, out["y"])
    np.testing.assert_array_equal(request.get_tensor(mlp.output()).data, out["y"])
    np.testing.assert_array_equal(request.get_input_tensor().data, x)
    assert [v.name for v in request.inputs] == ["x"]


def test_set_tensor_and_output_in_place(mlp):
    request = mlp.create_infer_request()
    x = np.full((1, 16), 0.5, np.float32)
    y = np.zeros((1, 4), np.float32)
    request.set_tensor("x", troupe.Tensor(x))
    request.set_tensor("y", y)  # the results land in this array
    request.infer()
    np.testing.assert_allclose(y, mlp_reference(x), rtol=1e-5, atol=1e-5)
    request.set_input_tensor(0, x * 2)
    request.set_output_tensor(0, troupe.Tensor(troupe.Type.f32, [1, 4]))
    request.infer()
    np.testing.assert_allclose(request.get_output_tensor().data, mlp_reference(x * 2), rtol=1e-5,
                               atol=1e-5)


def test_start_async_wait_and_callback(mlp):
    request = mlp.create_infer_request()
    seen = []
    request.set_callback(lambda data: seen.append((data, request.results["y"].copy())), "first")
    x = np.ones((1, 16), np.float32)
    request.start_async({"x": x})
    request.wait()
    assert seen and seen[0][0] == "first"
    np.testing.assert_allclose(seen[0][1], mlp_reference(x), rtol=1e-5, atol=1e-5)
    request.start_async({"x": x}, userdata="second")
    assert request.wait_for(10000)
    assert seen[-1][0] == "second" and request.userdata == "second"
    request.set_callback(None)
    request.start_async({"x": x})
    request.wait()
    assert len(seen) == 2


def test_cancel(core):
    compiled = core.compile_model(mlp_model(), "CPU")
    request = compiled.create_infer_request()
    request.cancel()  # idle: nothing to cancel
    request.infer({"x": np.ones((1, 16), np.float32)})
    cancelled = 0
    for _ in range(50):
        request.start_async({"x": np.ones((1, 16), np.float32)})
        request.cancel()
        try:
            request.wait()
        except troupe.Cancelled as e:
            cancelled += 1
            assert "cancel" in str(e).lower()
    # A run may finish before cancel() reaches it; either way nothing hangs and the request
    # still works.
    x = np.ones((1, 16), np.float32)
    np.testing.assert_allclose(request.infer({"x": x})["y"], mlp_reference(x), rtol=1e-5,
                               atol=1e-5)


def test_errors_name_the_input(mlp):
    with pytest.raises(troupe.InvalidArgument, match="no input named 'z'") as e:
        mlp({"z": np.zeros((1, 16), np.float32)})
    assert isinstance(e.value, ValueError) and isinstance(e.value, troupe.Error)
    assert isinstance(e.value, RuntimeError)
    with pytest.raises(troupe.TensorMismatch, match="'x'") as e:
        mlp({"x": np.zeros((1, 15), np.float32)})
    assert isinstance(e.value, TypeError)
    with pytest.raises(troupe.InvalidArgument, match="index 3"):
        mlp({3: np.zeros((1, 16), np.float32)})
    with pytest.raises(TypeError, match="'x'.*complex"):
        mlp({"x": np.zeros((1, 16), np.complex64)})
    with pytest.raises(troupe.TensorMismatch, match="'x'"):
        mlp({"x": np.zeros((1, 16), np.bool_)})  # bool does not convert to f32
    with pytest.raises(TypeError, match="property 'PERF_COUNT'"):
        troupe.Core().compile_model(mlp_model(), "CPU", {"PERF_COUNT": object()})
    with pytest.raises(troupe.UnknownProperty, match="NOT_A_PROPERTY"):
        troupe.Core().compile_model(mlp_model(), "CPU", {"NOT_A_PROPERTY": 1})
    with pytest.raises(troupe.InvalidArgument, match="no_such_file.onnx"):
        troupe.Core().read_model("no_such_file.onnx")
    with pytest.raises(troupe.FormatError):
        troupe.Core().import_model(b"not a blob")


def test_busy_while_in_flight(core):
    # About 270M multiply-adds a request (milliseconds): a request of 8.5M (~0.2 ms) could end
    # before the next Python call on a loaded machine, twenty times in a row (seen in CI).
    compiled = core.compile_model(mlp_model(batch=64, inputs=1024, hidden=4096), "CPU")
    request = compiled.create_infer_request()
    x = np.ones((64, 1024), np.float32)
    busy = 0
    for _ in range(20):
        request.start_async({"x": x})
        try:
            request.get_output_tensor()
        except troupe.Busy as e:
            busy += 1
            assert "busy" in str(e)
        request.wait()
    assert busy > 0


def test_model_builder_errors_name_the_node():
    b = troupe.ModelBuilder("bad")
    x = b.input("x", troupe.Type.f32, [2, 3])
    w = b.constant("w", np.ones((4, 5), np.float32))
    b.output(b.op("MatMul", [x, w], name="the_matmul"), "y")
    with pytest.raises(troupe.ModelError, match="the_matmul"):
        b.build()


def test_read_save_model_and_query(core, tmp_path):
    model = mlp_model()
    assert model.name == "mlp" and [o.name for o in model.outputs] == ["y"]
    assert [n.op_type for n in model.get_ops()] == ["MatMul", "Add", "Relu", "MatMul"]
    path = tmp_path / "mlp.troupe"
    troupe.save_model(model, path)
    again = core.read_model(path)
    x = np.ones((1, 16), np.float32)
    np.testing.assert_array_equal(core.compile_model(again)({"x": x})["y"],
                                  core.compile_model(model)({"x": x})["y"])
    np.testing.assert_array_equal(core.compile_model(str(path))({"x": x})["y"],
                                  core.compile_model(model)({"x": x})["y"])
    supported = core.query_model(model, "CPU")
    assert set(supported) == {n.name for n in model.get_ops()}
    assert set(supported.values()) == {"CPU"}


def test_export_import_and_runtime_model(core, mlp):
    blob = mlp.export_model()
    assert isinstance(blob, bytes) and len(blob) > 100
    x = np.ones((1, 16), np.float32)
    for source in (blob, io.BytesIO(blob), bytearray(blob)):
        imported = core.import_model(source, "CPU")
        np.testing.assert_array_equal(imported({"x": x})["y"], mlp({"x": x})["y"])
    runtime = mlp.get_runtime_model()
    assert runtime.get_ops()
    attrs = runtime.get_ops()[0].attributes
    assert "implementation" in attrs and "execution_order" in attrs
    assert mlp.runtime_model.name == runtime.name
    assert "requests" in mlp.stats_report().lower()


def test_pre_post_processor_layout_and_type(core):
    # An image model: NCHW f32 input, y = x * 2 (Mul by a constant).
    b = troupe.ModelBuilder("image")
    x = b.input("image", troupe.Type.f32, [1, 3, 4, 5])
    b.output(b.op("Mul", [x, b.constant("two", np.array([2.0], np.float32))]), "y")
    ppp = troupe.PrePostProcessor(b.build())
    ppp.input("image").tensor().set_element_type(troupe.Type.u8).set_layout("NHWC")
    ppp.input("image").preprocess().convert_element_type(troupe.Type.f32).mean(1.0).scale([1, 2, 4])
    ppp.input("image").model().set_layout(troupe.Layout.NCHW)
    ppp.output(0).tensor().set_element_type(troupe.Type.f16)
    compiled = core.compile_model(ppp.build())
    assert compiled.input().shape == (1, 4, 5, 3) and compiled.input().element_type == troupe.Type.u8
    image = np.random.default_rng(3).integers(0, 255, (1, 4, 5, 3), dtype=np.uint8)
    y = compiled({"image": image})["y"]
    assert y.dtype == np.float16
    expected = ((image.astype(np.float32) - 1.0) / np.array([1, 2, 4], np.float32)) * 2
    np.testing.assert_allclose(y.astype(np.float32), expected.transpose(0, 3, 1, 2), rtol=1e-3)
    with pytest.raises(troupe.InvalidArgument, match="layout 'NCDHW'"):
        troupe.PrePostProcessor(b.build()).input().tensor().set_layout("NCDHW")


def test_help_and_docstrings():
    assert "read_model" in troupe.Core.__dict__ and troupe.Core.read_model.__doc__
    assert "OPTIMAL_NUMBER_OF_INFER_REQUESTS" in troupe.AsyncInferQueue.__doc__ or \
        "jobs=0" in troupe.AsyncInferQueue.__doc__
    text = troupe.InferRequest.infer.__doc__
    assert "GIL released" in text
    import pathlib
    package = pathlib.Path(troupe.__file__).parent
    assert (package / "__init__.pyi").is_file() and (package / "py.typed").is_file()
