#include "tests/fuzz/fuzz_model_runner.hpp"

#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <vector>

#include "troupe/infer_request.hpp"
#include "troupe/tensor.hpp"

namespace troupe::fuzz {
namespace {

// Bytes of a static value, or nullopt when its shape is dynamic, negative or overflows.
std::optional<int64_t> value_bytes(const ValueInfo& value) {
  if (!value.shape.is_static()) return std::nullopt;
  int64_t n = static_cast<int64_t>(element_size(value.type));
  for (int64_t d : value.shape.dims())
    if (d < 0 || __builtin_mul_overflow(n, d, &n)) return std::nullopt;
  return n;
}

// Whether every value of the (validated) model is static and all of them fit max_model_bytes.
bool small_enough(const Model& model) {
  int64_t total = 0;
  for (const ValueInfo& value : model.values()) {
    std::optional<int64_t> bytes = value_bytes(value);
    if (!bytes || __builtin_add_overflow(total, *bytes, &total) || total > max_model_bytes)
      return false;
  }
  return true;
}

// A copy of `model` with every dynamic input dimension bound to dynamic_dimension_size and shapes
// inferred again, so that the size check sees the values this inference will make.
std::shared_ptr<Model> with_bound_inputs(const Model& model) {
  std::shared_ptr<Model> bound = model.clone();
  bool changed = false;
  for (ValueId id : bound->inputs()) {
    Shape& shape = bound->value(id).shape;
    for (size_t i = 0; i < shape.rank(); ++i)
      if (shape[i] < 0) {
        shape[i] = dynamic_dimension_size;
        changed = true;
      }
  }
  if (changed) bound->validate();
  return bound;
}

}  // namespace

Core& fuzz_core() {
  // Never destroyed: a Core destroyed by the exit handlers tears down its CAF actor system after
  // CAF's own statics are gone (a heap corruption in ~actor_system), so it lives until the end.
  static Core* core = new Core;
  return *core;
}

void infer_once(CompiledModel& compiled) {
  InferRequest request = compiled.create_infer_request();
  for (const ValueInfo& input : compiled.inputs()) {
    Shape shape = input.shape;
    for (size_t i = 0; i < shape.rank(); ++i)
      if (shape[i] < 0) shape[i] = dynamic_dimension_size;
    ValueInfo bound{input.name, input.type, shape};
    std::optional<int64_t> bytes = value_bytes(bound);
    if (!bytes || *bytes > max_model_bytes) return;
    Tensor tensor(input.type, shape);
    if (tensor.byte_size() != 0) std::memset(tensor.raw_data(), 0, tensor.byte_size());
    request.set_tensor(input.name, tensor);
  }
  request.infer();
}

void compile_and_infer(const Model& model) {
  try {
    std::shared_ptr<Model> bound = with_bound_inputs(model);
    if (!small_enough(*bound)) return;
    CompiledModel compiled = fuzz_core().compile_model(bound, "CPU");
    infer_once(compiled);
  } catch (const Error&) {
    // A typed refusal: the expected outcome for most fuzzed models.
  }
}

const std::string& scratch_dir() {
  // Never destroyed: the exit handler that removes the directory runs after static destructors.
  static const std::string* dir = [] {
    auto* path = new std::string(
        (std::filesystem::temp_directory_path() / ("troupe_fuzz_" + std::to_string(::getpid())))
            .string());
    std::filesystem::create_directories(*path);
    // Removed at exit, so every replay (a ctest run) does not leave a directory behind.
    std::atexit([] {
      std::error_code ignored;
      std::filesystem::remove_all(scratch_dir(), ignored);
    });
    return path;
  }();
  return *dir;
}

const std::string& model_dir() {
  static const std::string dir = [] {
    std::filesystem::path path = std::filesystem::path(scratch_dir()) / "model";
    std::filesystem::create_directories(path);
    std::ofstream(path / "w.bin", std::ios::binary) << std::string(256, '\x01');
    std::ofstream(std::filesystem::path(scratch_dir()) / "outside.bin", std::ios::binary)
        << std::string(256, '\x02');
    return path.string();
  }();
  return dir;
}

void write_file(const std::string& path, const uint8_t* data, size_t size) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
}

}  // namespace troupe::fuzz
