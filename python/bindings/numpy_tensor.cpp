#include "numpy_tensor.hpp"

#include <pybind11/stl.h>

#include <cstring>
#include <optional>

#include "python_state.hpp"
#include "troupe/error.hpp"

namespace troupe::python {

namespace {

// NumPy's NPY_ARRAY_ALIGNED: pybind11 names only the contiguity flags.
constexpr int numpy_aligned_flag = 0x0100;

std::string describe(const py::dtype& dtype) {
  return py::str(static_cast<py::object>(dtype));
}

bool native_byte_order(const py::dtype& dtype) {
  const char order = dtype.byteorder();
  return order != '>';  // '<' (little, this machine), '=' native, '|' not applicable
}

// Copies `array` (any strides) into the dense tensor `dst` through NumPy, which knows every layout
// and broadcasting rule.
void copy_into(Tensor& dst, const py::array& array) {
  if (dst.size() == 0) return;
  if (array.flags() & py::array::c_style) {
    std::memcpy(dst.raw_data(), array.data(), dst.byte_size());
    return;
  }
  // Never released: a static py::object would be dropped after the interpreter is gone.
  static py::handle copyto = py::object(py::module_::import("numpy").attr("copyto")).release();
  copyto(array_from_tensor(dst, true), array);
}

// Each element, str (stored as UTF-8) or bytes (as they are), into a new string tensor.
Tensor strings_from_array(const py::array& array, const std::string& name) {
  Tensor out(ElementType::string,
             Shape(std::vector<int64_t>(array.shape(), array.shape() + array.ndim())));
  std::string* dst = out.data<std::string>();
  int64_t i = 0;
  for (py::handle item : array.attr("flat")) {
    if (py::isinstance<py::bytes>(item))
      dst[i++] = item.cast<std::string>();
    else if (PyUnicode_Check(item.ptr()))
      dst[i++] = py::str(item).cast<std::string>();
    else
      throw py::type_error("'" + name + "': element " + std::to_string(i) + " is a " +
                           std::string(py::str(item.get_type().attr("__name__"))) +
                           ", expected str or bytes (the model takes strings)");
  }
  return out;
}

// A NumPy array of Python str (text that is not UTF-8 keeps its bytes as surrogate escapes).
py::array array_of_strings(const Tensor& tensor) {
  const Tensor dense = tensor.contiguous();
  const std::string* texts = dense.data<std::string>();
  py::list items;
  for (int64_t i = 0; i < dense.size(); ++i) {
    PyObject* text = PyUnicode_DecodeUTF8(texts[i].data(), static_cast<Py_ssize_t>(texts[i].size()),
                                          "surrogateescape");
    if (!text) throw py::error_already_set();
    items.append(py::reinterpret_steal<py::object>(text));
  }
  // Never released: a static py::object would be dropped after the interpreter is gone.
  static py::handle numpy_array = py::object(py::module_::import("numpy").attr("array")).release();
  py::array flat = numpy_array(items, py::dtype("O"));
  return flat.attr("reshape")(shape_to_python(tensor.shape()));
}

}  // namespace

py::dtype dtype_of(ElementType type) {
  switch (type) {
    case ElementType::f32:
      return py::dtype::of<float>();
    case ElementType::f16:
      return py::dtype("float16");
    case ElementType::bf16:
      return py::dtype::of<uint16_t>();
    case ElementType::f64:
      return py::dtype::of<double>();
    case ElementType::i8:
      return py::dtype::of<int8_t>();
    case ElementType::u8:
      return py::dtype::of<uint8_t>();
    case ElementType::i32:
      return py::dtype::of<int32_t>();
    case ElementType::i64:
      return py::dtype::of<int64_t>();
    case ElementType::i16:
      return py::dtype::of<int16_t>();
    case ElementType::u16:
      return py::dtype::of<uint16_t>();
    case ElementType::u32:
      return py::dtype::of<uint32_t>();
    case ElementType::u64:
      return py::dtype::of<uint64_t>();
    case ElementType::boolean:
      return py::dtype::of<bool>();
    case ElementType::string:
      return py::dtype("O");  // Python str objects
    case ElementType::undefined:
      break;
  }
  throw InvalidArgument("element type 'undefined' has no NumPy dtype");
}

ElementType element_type_of(const py::dtype& dtype, ElementType wanted) {
  if (!native_byte_order(dtype)) return ElementType::undefined;
  const char kind = dtype.kind();
  const auto size = dtype.itemsize();
  switch (kind) {
    case 'f':
      return size == 4   ? ElementType::f32
             : size == 2 ? ElementType::f16
             : size == 8 ? ElementType::f64
                         : ElementType::undefined;
    case 'i':
      return size == 1   ? ElementType::i8
             : size == 2 ? ElementType::i16
             : size == 4 ? ElementType::i32
             : size == 8 ? ElementType::i64
                         : ElementType::undefined;
    case 'u':
      if (size == 1) return ElementType::u8;
      // bf16 travels as uint16 bits: a uint16 array is bf16 where the model wants bf16, else u16.
      if (size == 2) return wanted == ElementType::bf16 ? ElementType::bf16 : ElementType::u16;
      if (size == 4) return ElementType::u32;
      if (size == 8) return ElementType::u64;
      return ElementType::undefined;
    case 'b':
      return size == 1 ? ElementType::boolean : ElementType::undefined;
    case 'U':  // str
    case 'S':  // bytes
      return ElementType::string;
    case 'O':  // objects: strings where the model takes strings
      return wanted == ElementType::string ? ElementType::string : ElementType::undefined;
    default:
      return ElementType::undefined;
  }
}

py::tuple shape_to_python(const Shape& shape) {
  py::tuple out(shape.rank());
  for (size_t i = 0; i < shape.rank(); ++i) out[i] = py::int_(shape[i]);
  return out;
}

Shape shape_from_python(py::handle dims) {
  std::vector<int64_t> out;
  for (py::handle d : dims) out.push_back(d.cast<int64_t>());
  return Shape(std::move(out));
}

Tensor tensor_from_python(py::handle value, const ValueInfo& expected, bool share, bool* wrapped) {
  if (wrapped) *wrapped = false;
  if (py::isinstance<Tensor>(value)) return value.cast<Tensor>();
  py::array array;
  if (py::isinstance<py::array>(value)) {
    array = py::reinterpret_borrow<py::array>(value);
  } else {
    // A list or scalar becomes a fresh array of the model's dtype, which nobody else holds.
    // Never released: a static py::object would be dropped after the interpreter is gone.
    static py::handle asarray = py::object(py::module_::import("numpy").attr("asarray")).release();
    array = asarray(value, expected.type == ElementType::undefined ? py::object(py::none())
                                                                   : dtype_of(expected.type));
  }
  ElementType type = element_type_of(array.dtype(), expected.type);
  if (type == ElementType::string) return strings_from_array(array, expected.name);
  if (type == ElementType::undefined) {
    // A dtype troupe lacks (complex, longdouble, big-endian int32, ...): NumPy converts it when
    // the conversion keeps the values' kind, as troupe's own conversions do.
    //
    // Never released: a static py::object would be dropped after the interpreter is gone.
    static py::handle can_cast =
        py::object(py::module_::import("numpy").attr("can_cast")).release();
    const py::dtype target =
        expected.type == ElementType::undefined ? py::dtype::of<float>() : dtype_of(expected.type);
    if (!can_cast(array.dtype(), target, "same_kind").cast<bool>())
      throw py::type_error("'" + expected.name + "': NumPy dtype " + describe(array.dtype()) +
                           " has no troupe element type and does not convert to " +
                           describe(target) + " (the model's " +
                           std::string(to_string(expected.type)) + ")");
    array = array.attr("astype")(target);
    type = element_type_of(array.dtype(), expected.type);
    share = true;  // the converted array is ours
  }
  Shape shape(std::vector<int64_t>(array.shape(), array.shape() + array.ndim()));
  const int flags = array.flags();
  if (share && (flags & py::array::c_style) && (flags & numpy_aligned_flag)) {
    void* data = const_cast<void*>(array.data());
    if (wrapped) *wrapped = array.ptr() == value.ptr();
    return Tensor(type, shape, share_object(array), data);
  }
  Tensor copy(type, shape);
  copy_into(copy, array);
  return copy;
}

py::array array_from_tensor(const Tensor& tensor, bool share) {
  if (tensor.element_type() == ElementType::string) return array_of_strings(tensor);
  const py::dtype dtype = dtype_of(tensor.element_type());
  std::vector<py::ssize_t> dims(tensor.shape().begin(), tensor.shape().end());
  if (share && tensor.owns_memory()) {
    std::vector<py::ssize_t> strides(tensor.strides().begin(), tensor.strides().end());
    // The capsule owns a copy of the tensor handle: the memory lives as long as the array.
    py::capsule owner(new Tensor(tensor), [](void* p) { delete static_cast<Tensor*>(p); });
    return py::array(dtype, dims, strides, const_cast<void*>(tensor.raw_data()), owner);
  }
  py::array out(dtype, dims);
  if (tensor.size() == 0) return out;
  const Tensor dense = tensor.contiguous();
  std::memcpy(out.mutable_data(), dense.raw_data(), dense.byte_size());
  return out;
}

void bind_tensor(py::module_& m) {
  py::class_<Tensor>(m, "Tensor", R"doc(
An n-dimensional array troupe reads or writes. Copies share memory.

Tensor(array, element_type=None, shared_memory=False): from a NumPy array; with shared_memory the
tensor wraps the array (which must be C-contiguous and aligned) and keeps it alive, otherwise it
holds a copy. element_type=Type.bf16 reads a uint16 array as bfloat16 bits.
Tensor(element_type, shape): a zero-filled tensor troupe allocates.
)doc")
      .def(py::init([](py::array array, std::optional<ElementType> type, bool shared_memory) {
             ValueInfo info{"tensor", type.value_or(element_type_of(array.dtype())), Shape()};
             if (type && element_type_of(array.dtype(), *type) != *type)
               throw py::type_error("Tensor: NumPy dtype " + describe(array.dtype()) +
                                    " does not hold " + std::string(to_string(*type)) +
                                    " elements");
             return tensor_from_python(array, info, shared_memory);
           }),
           py::arg("array"), py::arg("element_type") = py::none(), py::arg("shared_memory") = false)
      .def(py::init([](ElementType type, py::iterable shape) {
             return Tensor(type, shape_from_python(shape));
           }),
           py::arg("element_type"), py::arg("shape"))
      .def_property_readonly(
          "data",
          [](py::object self) {
            const Tensor& t = self.cast<const Tensor&>();
            // std::string elements are no PyObjects: text comes out as a copy.
            if (t.element_type() == ElementType::string) return array_of_strings(t);
            std::vector<py::ssize_t> dims(t.shape().begin(), t.shape().end());
            std::vector<py::ssize_t> strides(t.strides().begin(), t.strides().end());
            return py::array(dtype_of(t.element_type()), dims, strides,
                             const_cast<void*>(t.raw_data()), self);
          },
          "A NumPy view of the elements (no copy); it keeps this tensor alive. bf16 shows as "
          "uint16 bits; strings come as a copy (an object array of str).")
      .def_property_readonly("shape", [](const Tensor& t) { return shape_to_python(t.shape()); })
      .def_property_readonly("element_type", &Tensor::element_type)
      .def_property_readonly("size", &Tensor::size, "Number of elements.")
      .def_property_readonly("byte_size", &Tensor::byte_size)
      .def_property_readonly("strides", &Tensor::strides, "Byte strides, one per dimension.")
      .def("copy", &Tensor::clone, "A dense deep copy.")
      .def("__repr__", [](const Tensor& t) {
        return "<troupe.Tensor " + std::string(to_string(t.element_type())) +
               t.shape().to_string() + ">";
      });
}

}  // namespace troupe::python
