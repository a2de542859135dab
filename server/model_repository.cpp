#include "server/model_repository.hpp"

#include <algorithm>
#include <fstream>

#include <nlohmann/json.hpp>

#include "server/property_json.hpp"
#include "server/serve_error.hpp"
#include "troupe/core.hpp"
#include "troupe/error.hpp"

namespace troupe::server {

namespace fs = std::filesystem;

namespace {

constexpr const char* model_files[] = {"model.onnx", "model.troupe", "model.blob"};

// Names come from URLs (load, unload): they must not walk out of the repository folder.
void check_name(const std::string& name) {
  const bool ok =
      !name.empty() && name.size() <= 128 && name[0] != '.' &&
      std::all_of(name.begin(), name.end(), [](char c) {
        return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == '.';
      });
  if (!ok)
    throw ServeError(
        ServeErrc::bad_request,
        "model name '" + name + "' is not valid: use letters, digits, '_', '-' and '.', not first");
}

std::string platform_of(const fs::path& file) {
  const auto ext = file.extension().string();
  if (ext == ".blob") return "troupe_blob";
  if (ext == ".troupe") return "troupe_model";
  return "troupe_onnx";
}

}  // namespace

ModelRepository::ModelRepository(Core& core, fs::path root, AnyMap defaults)
    : core_(core), root_(std::move(root)), defaults_(std::move(defaults)) {
  if (!root_.empty() && !fs::is_directory(root_))
    throw ServeError(ServeErrc::bad_request,
                     "model repository '" + root_.string() + "' is not a directory");
}

void ModelRepository::add_model(const std::string& name, const fs::path& path) {
  check_name(name);
  if (!fs::is_regular_file(path))
    throw ServeError(ServeErrc::bad_request,
                     "model '" + name + "': file '" + path.string() + "' does not exist");
  std::lock_guard<std::mutex> lock(mutex_);
  entries_[name].explicit_path = path;
}

void ModelRepository::add_model(const std::string& name, std::shared_ptr<const Model> model) {
  check_name(name);
  std::lock_guard<std::mutex> lock(mutex_);
  entries_[name].in_memory = std::move(model);
}

std::vector<std::string> ModelRepository::repository_names() const {
  std::vector<std::string> names;
  if (root_.empty()) return names;
  std::error_code ec;
  for (const auto& dir : fs::directory_iterator(root_, ec)) {
    const std::string name = dir.path().filename().string();
    if (dir.is_directory() && name[0] != '.') names.push_back(name);
  }
  std::sort(names.begin(), names.end());
  return names;
}

std::map<int64_t, fs::path> ModelRepository::version_files(const std::string& name,
                                                           const Entry* entry) const {
  std::map<int64_t, fs::path> files;
  if (entry && entry->explicit_path) {
    files[1] = *entry->explicit_path;
    return files;
  }
  const fs::path dir = root_ / name;
  if (root_.empty() || !fs::is_directory(dir))
    throw ServeError(ServeErrc::not_found, "unknown model '" + name + "'");
  std::error_code ec;
  for (const auto& version_dir : fs::directory_iterator(dir, ec)) {
    if (!version_dir.is_directory()) continue;
    const std::string v = version_dir.path().filename().string();
    if (v.empty() || v.size() > 18 || !std::all_of(v.begin(), v.end(), ::isdigit)) continue;
    for (const char* file : model_files)
      if (fs::is_regular_file(version_dir.path() / file)) {
        files[std::stoll(v)] = version_dir.path() / file;
        break;
      }
  }
  if (files.empty())
    throw ServeError(ServeErrc::bad_request,
                     "model '" + name +
                         "' has no version folder with model.onnx, model.troupe or "
                         "model.blob under '" +
                         dir.string() + "'");
  return files;
}

AnyMap ModelRepository::config_of(const std::string& name) const {
  AnyMap properties = defaults_;
  if (root_.empty()) return properties;
  const fs::path file = root_ / name / "config.json";
  if (!fs::is_regular_file(file)) return properties;
  std::ifstream in(file);
  nlohmann::json config = nlohmann::json::parse(in, nullptr, false);
  if (config.is_discarded() || !config.is_object())
    throw ServeError(ServeErrc::bad_request, file.string() + " is not a JSON object");
  try {
    for (auto& [key, value] : properties_of_json(config, file.string())) properties[key] = value;
  } catch (const InvalidArgument& e) {
    throw ServeError(ServeErrc::bad_request, e.what());
  }
  return properties;
}

std::shared_ptr<ServedModel> ModelRepository::compile(const std::string& name, int64_t version,
                                                      const fs::path& file) const {
  const AnyMap properties = config_of(name);
  try {
    CompiledModel compiled;
    if (file.extension() == ".blob") {
      std::ifstream in(file, std::ios::binary);
      compiled = core_.import_model(in, "CPU", properties);
    } else {
      compiled = core_.compile_model(file.string(), "CPU", properties);
    }
    return std::make_shared<ServedModel>(name, std::to_string(version), platform_of(file),
                                         std::move(compiled));
  } catch (const ServeError&) {
    throw;
  } catch (const std::exception& e) {
    throw ServeError(ServeErrc::bad_request, "model '" + name + "' version " +
                                                 std::to_string(version) + " (" + file.string() +
                                                 ") failed to load: " + e.what());
  }
}

std::shared_ptr<ServedModel> ModelRepository::compile(const std::string& name, int64_t version,
                                                      std::shared_ptr<const Model> model) const {
  try {
    return std::make_shared<ServedModel>(name, std::to_string(version), "troupe_model",
                                         core_.compile_model(model, "CPU", defaults_));
  } catch (const std::exception& e) {
    throw ServeError(ServeErrc::bad_request,
                     "model '" + name + "' failed to compile: " + std::string(e.what()));
  }
}

void ModelRepository::load(const std::string& name) {
  check_name(name);
  std::lock_guard<std::mutex> control(control_);
  Entry probe;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = entries_.find(name);
    if (it != entries_.end()) {
      probe.explicit_path = it->second.explicit_path;
      probe.in_memory = it->second.in_memory;
    }
  }
  // Throws not_found before touching the index.
  const auto files =
      probe.in_memory ? std::map<int64_t, fs::path>{{1, fs::path()}} : version_files(name, &probe);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    Entry& entry = entries_[name];
    if (entry.versions.empty()) entry.state = "LOADING";
  }
  std::map<int64_t, std::shared_ptr<ServedModel>> versions;
  try {
    for (const auto& [version, file] : files)
      versions[version] =
          probe.in_memory ? compile(name, version, probe.in_memory) : compile(name, version, file);
  } catch (const ServeError& e) {
    std::lock_guard<std::mutex> lock(mutex_);
    Entry& entry = entries_[name];
    if (entry.versions.empty()) {
      entry.state = "UNAVAILABLE";
      entry.reason = e.what();
    }
    throw;
  }
  std::map<int64_t, std::shared_ptr<ServedModel>> replaced;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    Entry& entry = entries_[name];
    replaced = std::move(entry.versions);
    entry.versions = std::move(versions);
    entry.state = "READY";
    entry.reason.clear();
  }
  // A reload swaps the versions at once; requests already admitted to the old ones finish there.
  for (auto& [version, model] : replaced) model->drain();
}

void ModelRepository::unload(const std::string& name) {
  check_name(name);
  std::lock_guard<std::mutex> control(control_);
  std::map<int64_t, std::shared_ptr<ServedModel>> removed;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = entries_.find(name);
    if (it == entries_.end() || it->second.versions.empty())
      throw ServeError(ServeErrc::not_found, "model '" + name + "' is not loaded");
    removed = std::move(it->second.versions);
    it->second.versions.clear();
    it->second.state = "UNAVAILABLE";
    it->second.reason = "unloaded";
  }
  for (auto& [version, model] : removed) model->drain();
}

void ModelRepository::unload_all() {
  std::vector<std::string> names;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    for (const auto& [name, entry] : entries_)
      if (!entry.versions.empty()) names.push_back(name);
  }
  for (const auto& name : names) {
    try {
      unload(name);
    } catch (const ServeError&) {
      // unloaded meanwhile
    }
  }
}

size_t ModelRepository::load_all() {
  std::vector<std::string> names = repository_names();
  {
    std::lock_guard<std::mutex> lock(mutex_);
    for (const auto& [name, entry] : entries_) names.push_back(name);
  }
  std::sort(names.begin(), names.end());
  names.erase(std::unique(names.begin(), names.end()), names.end());
  size_t failed = 0;
  for (const auto& name : names) {
    try {
      load(name);
    } catch (const ServeError&) {
      ++failed;  // recorded in the index with its reason
    }
  }
  return failed;
}

std::vector<ModelIndexEntry> ModelRepository::index() const {
  std::vector<std::string> names = repository_names();
  std::vector<ModelIndexEntry> rows;
  std::lock_guard<std::mutex> lock(mutex_);
  for (const auto& [name, entry] : entries_) names.push_back(name);
  std::sort(names.begin(), names.end());
  names.erase(std::unique(names.begin(), names.end()), names.end());
  for (const auto& name : names) {
    auto it = entries_.find(name);
    if (it == entries_.end()) {
      rows.push_back({name, "", "UNAVAILABLE", "not loaded"});
      continue;
    }
    if (it->second.versions.empty()) {
      rows.push_back({name, "", it->second.state, it->second.reason});
      continue;
    }
    for (const auto& [version, model] : it->second.versions)
      rows.push_back({name, std::to_string(version), "READY", ""});
  }
  return rows;
}

std::shared_ptr<ServedModel> ModelRepository::find(const std::string& name,
                                                   const std::string& version) const {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = entries_.find(name);
  if (it == entries_.end()) throw ServeError(ServeErrc::not_found, "unknown model '" + name + "'");
  const Entry& entry = it->second;
  if (entry.versions.empty())
    throw ServeError(ServeErrc::unavailable, "model '" + name + "' is not ready (" + entry.state +
                                                 ": " + entry.reason + ")");
  if (version.empty()) return entry.versions.rbegin()->second;
  for (const auto& [v, model] : entry.versions)
    if (model->version() == version) return model;
  throw ServeError(ServeErrc::not_found, "model '" + name + "' has no version '" + version + "'");
}

std::vector<std::shared_ptr<ServedModel>> ModelRepository::loaded() const {
  std::vector<std::shared_ptr<ServedModel>> models;
  std::lock_guard<std::mutex> lock(mutex_);
  for (const auto& [name, entry] : entries_)
    for (const auto& [version, model] : entry.versions) models.push_back(model);
  return models;
}

}  // namespace troupe::server
