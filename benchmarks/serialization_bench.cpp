// Compile vs import: how much a compiled blob (or a model cache hit) saves over compiling.
//
//   /usr/bin/python3 benchmarks/make_serialization_models.py MODELS_DIR
//   TROUPE_BENCH_MODELS=MODELS_DIR troupe_benchmarks --benchmark_filter=Serialization
//
// For every *.onnx in MODELS_DIR (default ./models): reading it (ONNX, and troupe's own format),
// compiling it, exporting the blob, importing it from a blob file (std::ifstream), and a
// compile_model(path) that hits the model cache (which maps the entry instead of reading it).
// Times are per call with the CompiledModel's teardown excluded. CompileGraph and ImportGraph are
// the parts of Compile and Import before the pipeline (stage actors, per-stream kernels) is built,
// which both then do the same way.

#include <benchmark/benchmark.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>

#include "engine/graph/compiled_graph.hpp"
#include "engine/runtime/cpu_plugin.hpp"
#include "serialization/blob/compiled_blob.hpp"
#include "troupe/core.hpp"
#include "troupe/properties.hpp"
#include "troupe/serialize.hpp"

namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

fs::path models_dir() {
  const char* dir = std::getenv("TROUPE_BENCH_MODELS");
  return dir ? fs::path(dir) : fs::path("models");
}

fs::path work_dir() {
  static const fs::path dir = [] {
    fs::path d = fs::temp_directory_path() / "troupe_serialization_bench";
    fs::create_directories(d / "cache");
    return d;
  }();
  return dir;
}

troupe::Core& core() {
  // Never destroyed: a Core destroyed during static destruction tears down its CAF actor system
  // after CAF's own statics are gone (heap corruption at exit).
  static troupe::Core* c = new troupe::Core;
  return *c;
}

// Per model, made once: the model read from ONNX, its .troupe file and its blob.
struct Prepared {
  std::shared_ptr<troupe::Model> model;
  std::string troupe_path;
  std::string blob_path;
  size_t blob_size = 0;
};

Prepared& prepared(const std::string& onnx_path) {
  static std::map<std::string, Prepared> cache;
  auto it = cache.find(onnx_path);
  if (it != cache.end()) return it->second;
  Prepared p;
  p.model = core().read_model(onnx_path);
  p.troupe_path = (work_dir() / (fs::path(onnx_path).stem().string() + ".troupe")).string();
  troupe::save_model(p.model, p.troupe_path);
  p.blob_path = (work_dir() / (fs::path(onnx_path).stem().string() + ".blob")).string();
  std::ofstream out(p.blob_path, std::ios::binary | std::ios::trunc);
  core().compile_model(p.model).export_model(out);
  out.close();
  p.blob_size = fs::file_size(p.blob_path);
  return cache.emplace(onnx_path, std::move(p)).first->second;
}

template <class F>
void timed(benchmark::State& state, F&& body) {
  for (auto _ : state) {
    const auto start = Clock::now();
    auto result = body();
    state.SetIterationTime(std::chrono::duration<double>(Clock::now() - start).count());
    benchmark::DoNotOptimize(result);
  }
}

void read_onnx(benchmark::State& state, const std::string& path) {
  timed(state, [&] { return core().read_model(path); });
}

void read_troupe(benchmark::State& state, const std::string& path) {
  const auto& p = prepared(path);
  timed(state, [&] { return core().read_model(p.troupe_path); });
}

void compile(benchmark::State& state, const std::string& path) {
  const auto& p = prepared(path);
  timed(state, [&] { return core().compile_model(p.model); });
}

void compile_graph(benchmark::State& state, const std::string& path) {
  const auto& p = prepared(path);
  const troupe::detail::CompileConfig config = troupe::detail::CpuPlugin().resolve({});
  timed(state, [&] { return troupe::detail::compile_graph(*p.model, config); });
}

void import_graph(benchmark::State& state, const std::string& path) {
  const auto& p = prepared(path);
  const auto capabilities = troupe::detail::CpuPlugin::capabilities();
  timed(state, [&] {
    std::ifstream in(p.blob_path, std::ios::binary);
    return troupe::serialization::read_compiled_blob(in, "CPU", capabilities).graph;
  });
}

void compile_file(benchmark::State& state, const std::string& path) {
  timed(state, [&] { return core().compile_model(path); });
}

void export_blob(benchmark::State& state, const std::string& path) {
  const auto& p = prepared(path);
  auto compiled = core().compile_model(p.model);
  timed(state, [&] {
    std::ostringstream out;
    compiled.export_model(out);
    return out.str().size();
  });
  state.counters["blob_MB"] = static_cast<double>(p.blob_size) / 1e6;
}

void import_blob(benchmark::State& state, const std::string& path) {
  const auto& p = prepared(path);
  timed(state, [&] {
    std::ifstream in(p.blob_path, std::ios::binary);
    return core().import_model(in);
  });
}

void cache_hit(benchmark::State& state, const std::string& path) {
  const troupe::AnyMap props = {{troupe::props::cache_dir, (work_dir() / "cache").string()}};
  core().compile_model(path, "CPU", props);  // warm the cache
  timed(state, [&] {
    auto compiled = core().compile_model(path, "CPU", props);
    if (!compiled.get_property(troupe::props::loaded_from_cache).as_bool())
      state.SkipWithError("not a cache hit");
    return compiled;
  });
}

int register_all() {
  std::error_code ec;
  if (!fs::is_directory(models_dir(), ec)) return 0;
  using Fn = void (*)(benchmark::State&, const std::string&);
  const std::pair<const char*, Fn> cases[] = {
      {"ReadOnnx", read_onnx},          {"ReadTroupe", read_troupe},
      {"CompileGraph", compile_graph},  {"Compile", compile},
      {"ReadAndCompile", compile_file}, {"Export", export_blob},
      {"ImportGraph", import_graph},    {"Import", import_blob},
      {"CacheHit", cache_hit}};
  for (const auto& entry : fs::directory_iterator(models_dir())) {
    if (entry.path().extension() != ".onnx") continue;
    const std::string path = entry.path().string();
    const std::string model = entry.path().stem().string();
    for (const auto& [name, fn] : cases)
      benchmark::RegisterBenchmark(("Serialization/" + std::string(name) + "/" + model).c_str(),
                                   [fn = fn, path](benchmark::State& s) { fn(s, path); })
          ->UseManualTime()
          ->Unit(benchmark::kMillisecond)
          ->Iterations(5);
  }
  return 0;
}

const int registered = register_all();

}  // namespace
