#pragma once

#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "server/served_model.hpp"
#include "troupe/any.hpp"
#include "troupe/model.hpp"

namespace troupe {
class Core;
}

namespace troupe::server {

/// One row of the repository index (the model repository extension's `index`).
struct ModelIndexEntry {
  std::string name;
  std::string version;  // empty for a model that has no loaded version
  std::string state;    // "READY", "LOADING", "UNAVAILABLE"
  std::string reason;   // why it is not ready
};

/// The models a server serves: a repository folder `ROOT/NAME/VERSION/model.{onnx,troupe,blob}`
/// with an optional `ROOT/NAME/config.json` of compile properties, plus models named on the
/// command line. Thread-safe. Loading compiles outside the lock, so requests to other models are
/// never held up by a load; unloading removes the model at once and drains its in-flight
/// requests before returning.
class ModelRepository {
 public:
  /// `root` may be empty (only explicitly added models); `defaults` apply to every model under
  /// its config.json.
  ModelRepository(Core& core, std::filesystem::path root, AnyMap defaults = {});

  /// Registers NAME as version 1 of the model file `path` (the `-m NAME=PATH` form); it is loaded
  /// by load() or load_all().
  void add_model(const std::string& name, const std::filesystem::path& path);

  /// Registers NAME as version 1 of an in-memory model (the CLI's embedded default model).
  void add_model(const std::string& name, std::shared_ptr<const Model> model);

  /// Loads every known model; failures are recorded in the index, not thrown. Returns the number
  /// of models that failed.
  size_t load_all();

  /// (Re)loads every version of `name`. Throws ServeError: not_found for a name the repository
  /// does not have, bad_request when a version fails to load (naming file and reason).
  void load(const std::string& name);

  /// Unloads `name`: new requests get not_found at once; the call returns when the requests in
  /// flight have been answered. Throws ServeError(not_found) for an unknown or unloaded model.
  void unload(const std::string& name);

  /// Every model of the repository folder and every added model, with its state.
  std::vector<ModelIndexEntry> index() const;

  /// A ready version: the newest when `version` is empty. Throws ServeError: not_found for an
  /// unknown model or version, unavailable for a model that is not ready.
  std::shared_ptr<ServedModel> find(const std::string& name, const std::string& version = "") const;

  /// Every loaded version of every model.
  std::vector<std::shared_ptr<ServedModel>> loaded() const;

  /// Unloads everything (draining).
  void unload_all();

 private:
  struct Entry {
    std::optional<std::filesystem::path> explicit_path;  // -m NAME=PATH
    std::shared_ptr<const Model> in_memory;
    std::map<int64_t, std::shared_ptr<ServedModel>> versions;
    std::string state = "UNAVAILABLE";
    std::string reason = "not loaded";
  };
  /// The version folders and model files of `name` (explicit path or repository scan).
  std::map<int64_t, std::filesystem::path> version_files(const std::string& name,
                                                         const Entry* entry) const;
  std::shared_ptr<ServedModel> compile(const std::string& name, int64_t version,
                                       const std::filesystem::path& file) const;
  std::shared_ptr<ServedModel> compile(const std::string& name, int64_t version,
                                       std::shared_ptr<const Model> model) const;
  AnyMap config_of(const std::string& name) const;
  std::vector<std::string> repository_names() const;

  Core& core_;
  std::filesystem::path root_;
  AnyMap defaults_;
  std::mutex control_;  // serializes load/unload; never held while serving requests
  mutable std::mutex mutex_;
  std::map<std::string, Entry> entries_;
};

}  // namespace troupe::server
