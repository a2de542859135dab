// The model cache: Core::compile_model(model_path, ...) with CACHE_DIR. Hits, the key, recovery
// from corrupt and stale entries, and concurrent compilations (threads and processes).

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <spawn.h>
#include <sys/wait.h>

#include <cstdlib>
#include <thread>

#include "engine/runtime/cpu_plugin.hpp"
#include "serialization/blob/compiled_blob.hpp"
#include "tests/serialization/serialization_test_util.hpp"
#include "troupe/core.hpp"
#include "troupe/serialize.hpp"

extern char** environ;

namespace troupe {
namespace {

namespace fs = std::filesystem;
using test::error_of;
using ::testing::HasSubstr;

// Files in `dir` (names), sorted.
std::vector<std::string> files_in(const fs::path& dir) {
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(dir)) names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

class ModelCache : public ::testing::Test {
 protected:
  void SetUp() override {
    model_path_ = models_.file("small_cnn.troupe");
    save_model(test::make_small_cnn(), model_path_);
    cache_ = cache_dir_.path().string();
  }
  AnyMap with_cache(AnyMap props = {}) {
    props[props::cache_dir] = cache_;
    return props;
  }
  std::string only_entry() {
    auto names = files_in(cache_);
    EXPECT_EQ(names.size(), 1u);
    return names.empty() ? std::string() : (cache_dir_.path() / names[0]).string();
  }
  test::TempDir models_{"cache_models"};
  test::TempDir cache_dir_{"cache_dir"};
  std::string model_path_;
  std::string cache_;
  Core core_;
};

TEST_F(ModelCache, CompileFromAPathWithoutACache) {
  auto compiled = core_.compile_model(model_path_);
  EXPECT_FALSE(compiled.get_property(props::loaded_from_cache).as_bool());
  EXPECT_EQ(test::run_once(compiled, test::small_cnn_input()).size(), 10u);
  EXPECT_THAT(error_of<InvalidArgument>([&] {
                core_.compile_model(models_.file("missing.troupe"), "CPU", with_cache());
              }),
              HasSubstr("does not exist"));
  EXPECT_THROW(core_.compile_model(nullptr), InvalidArgument);
}

TEST_F(ModelCache, SecondCompileIsAHit) {
  auto first = core_.compile_model(model_path_, "CPU", with_cache());
  EXPECT_FALSE(first.get_property(props::loaded_from_cache).as_bool());
  const std::string entry = only_entry();
  EXPECT_THAT(entry, ::testing::EndsWith(".blob"));
  EXPECT_EQ(fs::path(entry).stem().string().size(), 16u);  // 64-bit key in hex

  auto second = core_.compile_model(model_path_, "CPU", with_cache());
  EXPECT_TRUE(second.get_property(props::loaded_from_cache).as_bool());
  const Tensor input = test::small_cnn_input();
  EXPECT_EQ(test::run_once(second, input), test::run_once(first, input));
  EXPECT_EQ(files_in(cache_).size(), 1u);
}

TEST_F(ModelCache, CacheDirOnTheDeviceAndItsValidation) {
  EXPECT_EQ(core_.get_property("CPU", props::cache_dir).as_string(), "");
  EXPECT_THAT(core_.get_property("CPU", props::supported_properties).as_strings(),
              ::testing::Contains(std::string(props::cache_dir)));
  EXPECT_THAT(error_of<InvalidArgument>([&] {
                core_.set_property("CPU", {{props::cache_dir, 5}});
              }),
              HasSubstr("CACHE_DIR"));
  core_.set_property("CPU", {{props::cache_dir, cache_}});
  EXPECT_EQ(core_.get_property("CPU", props::cache_dir).as_string(), cache_);
  core_.compile_model(model_path_);
  EXPECT_TRUE(core_.compile_model(model_path_).get_property(props::loaded_from_cache).as_bool());
  // A model object (not a file) is never cached.
  EXPECT_FALSE(
      core_.compile_model(test::make_small_cnn()).get_property(props::loaded_from_cache).as_bool());
}

TEST_F(ModelCache, KeyCoversContentAndGraphSettingsButNotPipelineSettings) {
  core_.compile_model(model_path_, "CPU", with_cache());
  // Pipeline-only settings: still a hit, and they apply.
  auto profiled = core_.compile_model(
      model_path_, "CPU", with_cache({{props::enable_profiling, true}, {props::num_streams, 2}}));
  EXPECT_TRUE(profiled.get_property(props::loaded_from_cache).as_bool());
  EXPECT_TRUE(profiled.get_property(props::enable_profiling).as_bool());
  EXPECT_EQ(profiled.get_property(props::num_streams).as_int(), 2);
  // Other content: a miss and a second entry.
  const std::string other = models_.file("other.troupe");
  save_model(test::make_small_cnn(99), other);
  EXPECT_FALSE(core_.compile_model(other, "CPU", with_cache())
                   .get_property(props::loaded_from_cache)
                   .as_bool());
  EXPECT_EQ(files_in(cache_).size(), 2u);
  // Same content under another name: the same entry.
  const std::string copy = models_.file("copy.troupe");
  fs::copy_file(model_path_, copy);
  EXPECT_TRUE(core_.compile_model(copy, "CPU", with_cache())
                  .get_property(props::loaded_from_cache)
                  .as_bool());
  // A graph-shaping setting: a miss.
  EXPECT_FALSE(
      core_.compile_model(model_path_, "CPU", with_cache({{props::disable_transformations, true}}))
          .get_property(props::loaded_from_cache)
          .as_bool());
  EXPECT_EQ(files_in(cache_).size(), 3u);
}

TEST_F(ModelCache, CorruptEntryIsRemovedRecompiledAndRewritten) {
  auto reference = core_.compile_model(model_path_, "CPU", with_cache());
  const std::string entry = only_entry();
  const std::string good = test::read_bytes(entry);
  const Tensor input = test::small_cnn_input();
  const auto expected = test::run_once(reference, input);

  std::string flipped = good;
  flipped[flipped.size() - 5] ^= 0x20;
  const std::vector<std::pair<std::string, std::string>> damage = {
      {flipped, "payload checksum mismatch"},
      {good.substr(0, good.size() / 2), "truncated at byte " + std::to_string(good.size() / 2)},
      {"garbage", "magic is 'garbage'"},
      {std::string(), "magic is missing"},
  };
  for (const auto& [bytes, reason] : damage) {
    test::write_bytes(entry, bytes);
    ::testing::internal::CaptureStderr();
    auto recompiled = core_.compile_model(model_path_, "CPU", with_cache());
    const std::string warning = ::testing::internal::GetCapturedStderr();
    EXPECT_FALSE(recompiled.get_property(props::loaded_from_cache).as_bool()) << reason;
    EXPECT_THAT(warning, HasSubstr("troupe: warning: model cache entry '" + entry + "'"));
    EXPECT_THAT(warning, HasSubstr(reason));
    EXPECT_THAT(warning, HasSubstr("removing it and compiling the model again"));
    EXPECT_EQ(test::run_once(recompiled, input), expected);
    EXPECT_EQ(test::read_bytes(entry), good) << reason;  // rewritten
    EXPECT_TRUE(core_.compile_model(model_path_, "CPU", with_cache())
                    .get_property(props::loaded_from_cache)
                    .as_bool());
  }
}

TEST_F(ModelCache, StaleEntryFromAnotherVersionIsReplaced) {
  core_.compile_model(model_path_, "CPU", with_cache());
  const std::string entry = only_entry();
  const std::string good = test::read_bytes(entry);
  std::istringstream in(good);
  serialization::BlobInfo info = serialization::read_blob_info(in);
  info.troupe_version = "0.0.1";
  test::write_bytes(entry, serialization::reseal_blob(info, serialization::blob_payload(good)));
  ::testing::internal::CaptureStderr();
  auto compiled = core_.compile_model(model_path_, "CPU", with_cache());
  EXPECT_THAT(::testing::internal::GetCapturedStderr(), HasSubstr("made by troupe 0.0.1"));
  EXPECT_FALSE(compiled.get_property(props::loaded_from_cache).as_bool());
  EXPECT_EQ(test::read_bytes(entry), good);
}

TEST_F(ModelCache, TemporaryFilesOfCrashedWritersAreRemoved) {
  core_.compile_model(model_path_, "CPU", with_cache());
  const std::string entry = only_entry();
  const std::string stale = entry + ".tmp.12345.0.0";
  const std::string fresh = entry + ".tmp.12345.0.1";
  test::write_bytes(stale, "partial");
  test::write_bytes(fresh, "partial");
  fs::last_write_time(stale, fs::file_time_type::clock::now() - std::chrono::hours(1));
  fs::remove(entry);  // a miss, so the entry is written again
  core_.compile_model(model_path_, "CPU", with_cache());
  EXPECT_FALSE(fs::exists(stale));
  EXPECT_TRUE(fs::exists(fresh));  // may belong to a writer still at work
  EXPECT_TRUE(fs::exists(entry));
}

TEST_F(ModelCache, UnwritableCacheIsAWarningNotAnError) {
  const std::string blocker = models_.file("not_a_dir");
  test::write_bytes(blocker, "x");  // a file where the cache directory should be
  ::testing::internal::CaptureStderr();
  auto compiled = core_.compile_model(model_path_, "CPU", {{props::cache_dir, blocker + "/cache"}});
  EXPECT_THAT(::testing::internal::GetCapturedStderr(), HasSubstr("cannot store"));
  EXPECT_FALSE(compiled.get_property(props::loaded_from_cache).as_bool());
  EXPECT_EQ(test::run_once(compiled, test::small_cnn_input()).size(), 10u);
}

TEST_F(ModelCache, ConcurrentThreadsLeaveOneValidEntry) {
  for (int attempt = 0; attempt < 3; ++attempt) {
    fs::remove_all(cache_);
    constexpr int threads = 4;
    std::atomic<int> ready{0};
    std::vector<std::string> errors(threads);
    std::vector<std::thread> pool;
    for (int t = 0; t < threads; ++t) {
      pool.emplace_back([&, t] {
        try {
          Core core;
          ++ready;
          while (ready.load() < threads) std::this_thread::yield();
          core.compile_model(model_path_, "CPU", with_cache());
        } catch (const std::exception& e) {
          errors[t] = e.what();
        }
      });
    }
    for (auto& th : pool) th.join();
    for (const auto& e : errors) EXPECT_EQ(e, "");
    const auto names = files_in(cache_);
    ASSERT_EQ(names.size(), 1u) << "leftover temporary files?";
    EXPECT_TRUE(core_.compile_model(model_path_, "CPU", with_cache())
                    .get_property(props::loaded_from_cache)
                    .as_bool());
  }
}

// Run by ConcurrentProcessesLeaveOneValidEntry in child processes; does nothing otherwise.
TEST(ModelCacheChild, CompileFromEnvironment) {
  const char* model = std::getenv("TROUPE_CACHE_CHILD_MODEL");
  const char* cache = std::getenv("TROUPE_CACHE_CHILD_DIR");
  if (!model || !cache)
    GTEST_SKIP() << "only run as a child of ConcurrentProcessesLeaveOneValidEntry";
  Core core;
  core.compile_model(model, "CPU", {{props::cache_dir, std::string(cache)}});
}

TEST_F(ModelCache, ConcurrentProcessesLeaveOneValidEntry) {
  const std::string self = fs::read_symlink("/proc/self/exe").string();
  std::vector<std::string> env_strings;
  for (char** e = environ; *e; ++e) env_strings.emplace_back(*e);
  env_strings.push_back("TROUPE_CACHE_CHILD_MODEL=" + model_path_);
  env_strings.push_back("TROUPE_CACHE_CHILD_DIR=" + cache_);
  std::vector<char*> envp;
  for (auto& s : env_strings) envp.push_back(s.data());
  envp.push_back(nullptr);
  std::string arg0 = self;
  std::string filter = "--gtest_filter=ModelCacheChild.CompileFromEnvironment";
  char* argv[] = {arg0.data(), filter.data(), nullptr};
  std::vector<pid_t> children(3);
  for (auto& pid : children)
    ASSERT_EQ(posix_spawn(&pid, self.c_str(), nullptr, nullptr, argv, envp.data()), 0);
  for (pid_t pid : children) {
    int status = 0;
    ASSERT_EQ(waitpid(pid, &status, 0), pid);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "child status " << status;
  }
  ASSERT_EQ(files_in(cache_).size(), 1u);
  auto hit = core_.compile_model(model_path_, "CPU", with_cache());
  EXPECT_TRUE(hit.get_property(props::loaded_from_cache).as_bool());
  EXPECT_EQ(test::run_once(hit, test::small_cnn_input()).size(), 10u);
}

}  // namespace
}  // namespace troupe
