#pragma once

// Small ONNX models built with the protobuf classes, for the reader and fuzz tests.

#include <onnx/onnx_pb.h>

#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

namespace troupe::testing {

namespace fs = std::filesystem;

// A dimension: a number, or a symbolic name such as "batch".
struct OnnxDim {
  OnnxDim(int64_t v) : value(v) {}
  OnnxDim(const char* p) : param(p) {}
  int64_t value = -1;
  std::string param;
};

// A directory under the system temp dir, removed with everything in it at the end of the test.
class TempDir {
 public:
  TempDir() {
    static int counter = 0;
    path_ = fs::temp_directory_path() /
            ("troupe_onnx_test_" + std::to_string(::getpid()) + "_" + std::to_string(counter++));
    fs::remove_all(path_);
    fs::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  const fs::path& path() const { return path_; }
  fs::path write(const std::string& name, const std::string& bytes) const {
    fs::path p = path_ / name;
    std::ofstream(p, std::ios::binary) << bytes;
    return p;
  }

 private:
  fs::path path_;
};

inline onnx::ModelProto onnx_model(int64_t opset = 13, int64_t ir_version = 8) {
  onnx::ModelProto m;
  m.set_ir_version(ir_version);
  m.set_producer_name("troupe-tests");
  auto* import = m.add_opset_import();
  import->set_domain("");
  import->set_version(opset);
  m.mutable_graph()->set_name("test_graph");
  return m;
}

inline onnx::ValueInfoProto* onnx_value(
    google::protobuf::RepeatedPtrField<onnx::ValueInfoProto>* list, const std::string& name,
    int32_t elem_type, const std::vector<OnnxDim>& dims) {
  auto* v = list->Add();
  v->set_name(name);
  auto* t = v->mutable_type()->mutable_tensor_type();
  t->set_elem_type(elem_type);
  auto* shape = t->mutable_shape();
  for (const auto& d : dims) {
    auto* dim = shape->add_dim();
    if (d.param.empty())
      dim->set_dim_value(d.value);
    else
      dim->set_dim_param(d.param);
  }
  return v;
}

inline void onnx_input(onnx::ModelProto& m, const std::string& name, int32_t elem_type,
                       const std::vector<OnnxDim>& dims) {
  onnx_value(m.mutable_graph()->mutable_input(), name, elem_type, dims);
}

inline void onnx_output(onnx::ModelProto& m, const std::string& name, int32_t elem_type,
                        const std::vector<OnnxDim>& dims) {
  onnx_value(m.mutable_graph()->mutable_output(), name, elem_type, dims);
}

inline onnx::NodeProto* onnx_node(onnx::ModelProto& m, const std::string& op_type,
                                  const std::vector<std::string>& inputs,
                                  const std::vector<std::string>& outputs,
                                  const std::string& name = {}) {
  auto* n = m.mutable_graph()->add_node();
  n->set_op_type(op_type);
  n->set_name(name);
  for (const auto& i : inputs) n->add_input(i);
  for (const auto& o : outputs) n->add_output(o);
  return n;
}

inline void onnx_int_attribute(onnx::NodeProto* n, const std::string& name, int64_t value) {
  auto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::INT);
  a->set_i(value);
}

inline void onnx_float_attribute(onnx::NodeProto* n, const std::string& name, float value) {
  auto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::FLOAT);
  a->set_f(value);
}

inline void onnx_ints_attribute(onnx::NodeProto* n, const std::string& name,
                                const std::vector<int64_t>& values) {
  auto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::INTS);
  for (auto v : values) a->add_ints(v);
}

inline void onnx_string_attribute(onnx::NodeProto* n, const std::string& name,
                                  const std::string& value) {
  auto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::STRING);
  a->set_s(value);
}

// A float tensor with its values in raw_data.
inline onnx::TensorProto onnx_raw_f32(const std::string& name, const std::vector<int64_t>& dims,
                                      const std::vector<float>& values) {
  onnx::TensorProto t;
  t.set_name(name);
  t.set_data_type(onnx::TensorProto::FLOAT);
  for (auto d : dims) t.add_dims(d);
  t.set_raw_data(
      std::string(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(float)));
  return t;
}

// y = Relu(x + w): x f32 [2,3] input, w f32 [2,3] initializer.
inline onnx::ModelProto onnx_add_relu_model() {
  auto m = onnx_model();
  onnx_input(m, "x", onnx::TensorProto::FLOAT, {2, 3});
  *m.mutable_graph()->add_initializer() =
      onnx_raw_f32("w", {2, 3}, {1.f, -2.f, 3.f, -4.f, 5.f, -6.f});
  onnx_node(m, "Add", {"x", "w"}, {"sum"}, "add");
  onnx_node(m, "Relu", {"sum"}, {"y"}, "relu");
  onnx_output(m, "y", onnx::TensorProto::FLOAT, {2, 3});
  return m;
}

inline std::string serialize(const onnx::ModelProto& m) {
  std::string bytes;
  m.SerializeToString(&bytes);
  return bytes;
}

}  // namespace troupe::testing
