"""NumPy exchange: every dtype, zero copies where safe (asserted by address), conversions of
dtype and layout, bfloat16 as uint16 bits, and the lifetime of shared arrays."""
import gc
import weakref

import numpy as np
import pytest

import troupe

from conftest import identity_model, mlp_model, mlp_reference

DTYPES = {troupe.Type.f32: np.float32, troupe.Type.f16: np.float16, troupe.Type.f64: np.float64,
          troupe.Type.i8: np.int8, troupe.Type.u8: np.uint8, troupe.Type.i32: np.int32,
          troupe.Type.i64: np.int64, troupe.Type.boolean: np.bool_, troupe.Type.bf16: np.uint16,
          troupe.Type.i16: np.int16, troupe.Type.u16: np.uint16, troupe.Type.u32: np.uint32,
          troupe.Type.u64: np.uint64}


def address(array):
    return array.__array_interface__["data"][0]


@pytest.mark.parametrize("element_type", list(DTYPES), ids=str)
def test_every_dtype_round_trips(core, element_type):
    compiled = core.compile_model(identity_model(element_type))
    dtype = DTYPES[element_type]
    assert element_type.to_dtype() == dtype and compiled.input().dtype == dtype
    rng = np.random.default_rng(7)
    if element_type == troupe.Type.bf16:
        x = troupe.float32_to_bf16(rng.standard_normal((2, 3)).astype(np.float32))
    elif element_type == troupe.Type.boolean:
        x = rng.integers(0, 2, (2, 3)).astype(np.bool_)
    elif np.issubdtype(dtype, np.unsignedinteger):
        # Values beyond the signed range of the same width: a signed path would get them wrong.
        x = rng.integers(0, np.iinfo(dtype).max, (2, 3), dtype=dtype, endpoint=True)
    else:
        x = (rng.standard_normal((2, 3)) * 50).astype(dtype)
    y = compiled({"x": x})["y"]
    assert y.dtype == dtype
    np.testing.assert_array_equal(y, x)


def test_float16_and_bf16_conversions(core):
    # f16 and f64 arrays fed to an f32 model: troupe converts them in its preprocess stage.
    compiled = core.compile_model(mlp_model())
    x = np.random.default_rng(2).standard_normal((1, 16)).astype(np.float16)
    np.testing.assert_allclose(compiled(x)["y"], mlp_reference(x.astype(np.float32)), rtol=1e-4,
                               atol=1e-4)
    np.testing.assert_allclose(compiled(x.astype(np.float64))["y"],
                               mlp_reference(x.astype(np.float32)), rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(compiled(x.astype(np.int64))["y"],
                               mlp_reference(x.astype(np.int64).astype(np.float32)), rtol=1e-4,
                               atol=1e-4)
    # bf16 in and out through the PrePostProcessor, as uint16 bits.
    ppp = troupe.PrePostProcessor(mlp_model())
    ppp.input().tensor().set_element_type(troupe.Type.bf16)
    ppp.output().tensor().set_element_type(troupe.Type.bf16)
    bf = core.compile_model(ppp.build())
    bits = troupe.float32_to_bf16(x.astype(np.float32))
    y = bf({"x": bits})["y"]
    assert y.dtype == np.uint16
    expected = mlp_reference(troupe.bf16_to_float32(bits))
    np.testing.assert_allclose(troupe.bf16_to_float32(y), expected, rtol=2e-2, atol=5e-2)
    t = troupe.Tensor(bits, troupe.Type.bf16)
    assert t.element_type == troupe.Type.bf16 and t.data.dtype == np.uint16
    # uint16 is bf16 only where the model wants bf16; elsewhere it is u16, which troupe converts.
    np.testing.assert_allclose(compiled({"x": bits})["y"], mlp_reference(bits.astype(np.float32)),
                               rtol=1e-4)


def test_other_numpy_dtypes_are_cast(core):
    compiled = core.compile_model(mlp_model())
    x = np.arange(16, dtype=np.longdouble).reshape(1, 16)  # no troupe type: NumPy converts it
    np.testing.assert_allclose(compiled(x)["y"], mlp_reference(x.astype(np.float32)), rtol=1e-5)
    x = np.arange(16, dtype=np.int16).reshape(1, 16)  # i16: troupe's preprocess converts it
    np.testing.assert_allclose(compiled(x)["y"], mlp_reference(x.astype(np.float32)), rtol=1e-5)
    np.testing.assert_allclose(compiled({"x": [[float(v) for v in range(16)]]})["y"],
                               mlp_reference(np.arange(16, dtype=np.float32)[None]), rtol=1e-5)
    big_endian = np.arange(16, dtype=">f4").reshape(1, 16)
    np.testing.assert_allclose(compiled(big_endian)["y"],
                               mlp_reference(np.arange(16, dtype=np.float32)[None]), rtol=1e-5)


def test_inputs_are_wrapped_not_copied(mlp):
    request = mlp.create_infer_request()
    x = np.ones((1, 16), np.float32)
    request.infer({"x": x})
    assert address(request.get_input_tensor().data) == address(x)
    request.infer({"x": x}, share_inputs=False)
    assert address(request.get_input_tensor().data) != address(x)
    # Not C-contiguous, or not aligned: copied (the engine never sees the caller's strides).
    wide = np.ones((16, 2), np.float32)
    request.infer({"x": wide.T[:1]})
    assert address(request.get_input_tensor().data) != address(wide)
    raw = np.zeros(16 * 4 + 1, np.uint8)
    misaligned = raw[1:].view(np.float32).reshape(1, 16)
    misaligned[:] = 1
    np.testing.assert_array_equal(request.infer({"x": misaligned})["y"], request.infer({"x": x})["y"])
    assert address(request.get_input_tensor().data) == address(x)
    # troupe.Tensor(shared_memory=True) shares, the default copies.
    assert address(troupe.Tensor(x, shared_memory=True).data) == address(x)
    assert address(troupe.Tensor(x).data) != address(x)


def test_layouts_give_the_same_result(mlp):
    rng = np.random.default_rng(5)
    x = rng.standard_normal((1, 16)).astype(np.float32)
    expected = mlp({"x": x})["y"]
    fortran = np.asfortranarray(rng.standard_normal((16, 16)).astype(np.float32))
    fortran[3] = x[0]
    np.testing.assert_array_equal(mlp({"x": fortran[3:4]})["y"], expected)
    strided = np.zeros((1, 32), np.float32)
    strided[:, ::2] = x
    np.testing.assert_array_equal(mlp({"x": strided[:, ::2]})["y"], expected)
    reversed_x = x[:, ::-1].copy()
    np.testing.assert_array_equal(mlp({"x": reversed_x[:, ::-1]})["y"], expected)


def test_outputs_shared_or_copied(mlp):
    request = mlp.create_infer_request()
    x = np.ones((1, 16), np.float32)
    shared = request.infer({"x": x}, share_outputs=True)["y"]
    tensor_address = address(request.get_output_tensor().data)
    assert address(shared) == tensor_address
    copied = request.infer({"x": x})["y"]
    assert address(copied) != tensor_address
    assert address(request.get_results(share_outputs=True)["y"]) == tensor_address
    np.testing.assert_array_equal(shared, copied)


def test_shared_outputs_outlive_request_model_and_core():
    core = troupe.Core()
    compiled = core.compile_model(mlp_model())
    request = compiled.create_infer_request()
    x = np.random.default_rng(9).standard_normal((1, 16)).astype(np.float32)
    y = request.infer({"x": x}, share_outputs=True)["y"]
    tensor = request.get_output_tensor()
    expected = mlp_reference(x)
    watch = weakref.ref(compiled)
    del request, compiled, core
    gc.collect()
    assert watch() is None
    np.testing.assert_allclose(y, expected, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(tensor.data, expected, rtol=1e-5, atol=1e-5)
    y += 1  # the memory is still writable and ours
    del tensor
    gc.collect()
    np.testing.assert_allclose(y, expected + 1, rtol=1e-5, atol=1e-5)


def test_wrapped_input_kept_alive_while_in_flight(core):
    compiled = core.compile_model(mlp_model())
    request = compiled.create_infer_request()
    x = np.random.default_rng(4).standard_normal((1, 16)).astype(np.float32)
    expected = mlp_reference(x)
    copy = x.copy()
    watch = weakref.ref(copy) if hasattr(copy, "__weakref__") else None
    request.start_async({"x": copy})
    del copy
    gc.collect()
    request.wait()
    np.testing.assert_allclose(request.results["y"], expected, rtol=1e-5, atol=1e-5)
    # The bound tensor holds the array; rebinding releases it.
    request.infer({"x": x})
    del request
    gc.collect()
    if watch is not None:
        assert watch() is None


def test_tensor_class():
    t = troupe.Tensor(troupe.Type.f16, [2, 3])
    assert t.shape == (2, 3) and t.element_type == troupe.Type.f16 and t.size == 6
    assert t.byte_size == 12 and t.data.dtype == np.float16 and not t.data.any()
    t.data[:] = 1.5
    assert t.copy().data.sum() == 9.0
    assert troupe.Type.from_dtype(np.dtype(np.int8)) == troupe.Type.i8
    assert troupe.Type.from_dtype(np.dtype(np.uint32)) == troupe.Type.u32
    assert troupe.Type.from_dtype(np.dtype(np.uint16)) == troupe.Type.u16  # bf16 only when asked
    assert troupe.Type.from_dtype(np.dtype(np.int16)) == troupe.Type.i16
    assert troupe.Type.from_dtype(np.dtype(np.complex64)) == troupe.Type.undefined
    assert "f16[2,3]" in repr(t)


def test_rebinding_the_same_array(mlp):
    # The same array bound again is not rebound (it is wrapped already): its new contents count,
    # and a copy made with share_inputs=False or a new shape/dtype rebinds.
    request = mlp.create_infer_request()
    x = np.ones((1, 16), np.float32)
    first = request.infer({"x": x})["y"]
    x[:] = 2
    np.testing.assert_allclose(request.infer({"x": x})["y"], mlp_reference(x), rtol=1e-5,
                               atol=1e-5)
    assert not np.array_equal(first, request.results["y"])
    request.infer({"x": x}, share_inputs=False)
    assert address(request.get_input_tensor().data) != address(x)
    request.infer({"x": x})
    assert address(request.get_input_tensor().data) == address(x)
    with pytest.raises(troupe.TensorMismatch, match="'x'"):
        x.shape = (16, 1)  # the same object, another shape: checked again
        request.infer({"x": x})
    x.shape = (1, 16)
    np.testing.assert_allclose(request.infer({"x": x})["y"], mlp_reference(x), rtol=1e-5,
                               atol=1e-5)


def _text_model(action="UPPER"):
    """kept = StringNormalizer(words, stopwords {"the"}, case-insensitive); numbers = Cast(kept
    from text to float) is not built: text in, text out."""
    b = troupe.ModelBuilder("text")
    words = b.input("words", troupe.Type.string, [-1])
    b.output(b.op("StringNormalizer", [words],
                  {"case_change_action": action, "stopwords": ["the"]}), "kept")
    return b.build()


def test_strings_in_and_out(core):
    compiled = core.compile_model(_text_model())
    assert compiled.input().element_type == troupe.Type.string
    # str, bytes and object arrays of str all carry text; the result is an object array of str.
    for words in (np.array(["The", "quick", "fox"]), np.array([b"The", b"quick", b"fox"]),
                  np.array(["The", "quick", "fox"], dtype=object), ["The", "quick", "fox"]):
        kept = compiled({"words": words})["kept"]
        assert kept.dtype == object and kept.tolist() == ["QUICK", "FOX"]
    kept = compiled({"words": np.array(["naïve", "ärger"])})["kept"]
    assert kept.tolist() == ["NAÏVE", "ÄRGER"]
    assert compiled({"words": np.array(["the", "THE"])})["kept"].tolist() == [""]
    with pytest.raises(TypeError, match="element 1 is a int, expected str or bytes"):
        compiled({"words": np.array(["a", 3], dtype=object)})
    tensor = troupe.Tensor(np.array(["x", "yz"]))
    assert tensor.element_type == troupe.Type.string and tensor.shape == (2,)
    assert tensor.data.tolist() == ["x", "yz"]  # a copy: str objects are not the tensor's text
