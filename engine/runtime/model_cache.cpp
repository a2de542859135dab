#include "engine/runtime/model_cache.hpp"

#include <chrono>
#include <filesystem>
#include <fstream>
#include <iostream>

#include "engine/graph/compiled_graph.hpp"
#include "engine/runtime/cpu_plugin.hpp"
#include "engine/runtime/import_config.hpp"
#include "serialization/blob/compiled_blob.hpp"
#include "serialization/file_io.hpp"
#include "serialization/fingerprint.hpp"
#include "serialization/model_formats.hpp"
#include "troupe/error.hpp"
#include "troupe/version.hpp"

namespace troupe::serialization {

namespace {

namespace fs = std::filesystem;

void warn(const std::string& message) {
  // One write, so lines of concurrent compilations do not interleave.
  std::cerr << ("troupe: warning: " + message + "\n") << std::flush;
}

// Removes temporary files of `entry` that a crashed writer left (old enough that no writer still
// works on them).
void remove_stale_temporaries(const std::string& entry) {
  std::error_code ec;
  const fs::path path(entry);
  const std::string prefix = path.filename().string() + ".tmp.";
  const auto now = fs::file_time_type::clock::now();
  for (const auto& e : fs::directory_iterator(path.parent_path(), ec)) {
    const std::string name = e.path().filename().string();
    if (name.rfind(prefix, 0) != 0) continue;
    const auto modified = fs::last_write_time(e.path(), ec);
    if (!ec && now - modified > std::chrono::minutes(10)) fs::remove(e.path(), ec);
  }
}

}  // namespace

std::string model_cache_key(const std::string& model_path, const detail::CompileConfig& config,
                            const std::vector<std::string>& capabilities) {
  const FileBytes file = map_file(model_path, "model file");
  Fingerprint64 key(0x7472'6f75'7065ull);  // "troupe"
  key.update_field(TROUPE_VERSION);
  key.update_u64(compiled_blob_format_version);
  key.update_field(detail::CpuPlugin::device_name);
  key.update_u64(capabilities.size());
  for (const auto& cap : capabilities) key.update_field(cap);
  key.update_field(fs::path(model_path).extension().string());
  key.update_u64(file.size);
  key.update(file.data, file.size);
  // The settings detail::same_graph_settings() compares.
  key.update_field(std::string(to_string(config.inference_precision)));
  key.update_u64(config.disable_transformations ? 1 : 0);
  key.update_field(config.device_id);
  return to_hex(key.digest());
}

std::string model_cache_entry(const std::string& cache_dir, const std::string& key) {
  return (fs::path(cache_dir) / (key + ".blob")).string();
}

std::shared_ptr<detail::CompiledModelImpl> compile_model_file(
    const std::string& model_path, const detail::CompileConfig& config,
    const std::shared_ptr<detail::Runtime>& runtime) {
  // Compiles the file; the kernels made while checking it go to the first execute stream.
  auto compile = [&] {
    auto model = read_model_file(model_path);
    std::vector<std::unique_ptr<kernels::Kernel>> kernels;
    auto graph = detail::compile_graph(*model, config, &kernels);
    // The file's model goes before the compiled one is built: that releases the weights its
    // kernels packed and gives the freed memory back (CompiledModelImpl).
    model.reset();
    return std::make_shared<detail::CompiledModelImpl>(runtime, std::move(graph), config, false,
                                                       std::move(kernels));
  };
  if (config.cache_dir.empty()) return compile();

  const auto capabilities = detail::CpuPlugin::capabilities();
  std::string entry;
  try {
    entry = model_cache_entry(config.cache_dir, model_cache_key(model_path, config, capabilities));
  } catch (const InvalidArgument&) {
    // An unreadable model file: let the reader report it in its own words.
    read_model_file(model_path);
    throw;
  }

  std::error_code ec;
  if (fs::exists(entry, ec)) {
    try {
      LoadedBlob blob =
          read_compiled_blob_file(entry, detail::CpuPlugin::device_name, capabilities);
      if (!detail::same_graph_settings(blob.info.config, config))
        throw FormatError("it was compiled with other settings");
      return std::make_shared<detail::CompiledModelImpl>(runtime, std::move(blob.graph), config,
                                                         true);
    } catch (const Error& e) {
      warn("model cache entry '" + entry + "' for '" + model_path + "' is unusable (" + e.what() +
           "); removing it and compiling the model again");
      fs::remove(entry, ec);
    }
  }

  auto impl = compile();
  try {
    fs::create_directories(config.cache_dir, ec);
    if (ec)
      throw InvalidArgument("cannot create directory '" + config.cache_dir + "': " + ec.message());
    remove_stale_temporaries(entry);
    write_file_atomically(entry, [&](std::ostream& out) {
      write_compiled_blob(out, *impl->graph(), config, detail::CpuPlugin::device_name,
                          capabilities);
    });
  } catch (const std::exception& e) {
    warn("cannot store '" + model_path + "' in the model cache: " + e.what());
  }
  return impl;
}

}  // namespace troupe::serialization
