// Compiled blobs: export -> import gives the same model and outputs; every refusal names what does
// not match; seeded random corruption never crashes import.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <random>
#include <sstream>

#include "engine/runtime/cpu_plugin.hpp"
#include "serialization/byte_io.hpp"
#include "serialization/blob/compiled_blob.hpp"
#include "tests/serialization/serialization_test_util.hpp"
#include "troupe/core.hpp"
#include "troupe/serialize.hpp"
#include "troupe/version.hpp"

namespace troupe {
namespace {

using test::error_of;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

std::string export_blob(const CompiledModel& compiled) {
  std::ostringstream out;
  compiled.export_model(out);
  return out.str();
}

CompiledModel import_blob(Core& core, const std::string& blob, const AnyMap& properties = {}) {
  std::istringstream in(blob);
  return core.import_model(in, "CPU", properties);
}

uint64_t header_length_of(const std::string& blob) {
  return serialization::get_le(reinterpret_cast<const unsigned char*>(blob.data()) + 12, 4);
}

// Where the payload starts: after the header, at the next multiple of 64.
uint64_t payload_offset_of(const std::string& blob) {
  return (24 + header_length_of(blob) + 63) / 64 * 64;
}

serialization::BlobInfo info_of(const std::string& blob) {
  std::istringstream in(blob);
  return serialization::read_blob_info(in);
}

// A stream that cannot seek or tell (like a pipe), to exercise import's chunked reading.
class ForwardOnlyBuf : public std::streambuf {
 public:
  explicit ForwardOnlyBuf(std::string bytes) : bytes_(std::move(bytes)) {
    setg(bytes_.data(), bytes_.data(), bytes_.data() + bytes_.size());
  }

 private:
  std::string bytes_;
};

class CompiledBlob : public ::testing::Test {
 protected:
  void SetUp() override {
    model_ = test::make_small_cnn();
    compiled_ = core_.compile_model(model_);
    blob_ = export_blob(compiled_);
  }
  std::string import_refusal(const std::string& blob) {
    return error_of<FormatError>([&] { import_blob(core_, blob); });
  }
  Core core_;
  std::shared_ptr<Model> model_;
  CompiledModel compiled_;
  std::string blob_;
};

TEST_F(CompiledBlob, ExportImportGivesTheSameModelAndOutputs) {
  CompiledModel imported = import_blob(core_, blob_);
  EXPECT_FALSE(imported.get_property(props::loaded_from_cache).as_bool());
  EXPECT_EQ(imported.get_property(props::model_name).as_string(), "small_cnn");
  ASSERT_EQ(imported.inputs().size(), 1u);
  EXPECT_EQ(imported.inputs()[0].name, "x");
  EXPECT_EQ(imported.inputs()[0].shape, Shape({1, 3, 8, 8}));
  EXPECT_EQ(imported.outputs()[0].name, "y");
  const Tensor input = test::small_cnn_input();
  EXPECT_EQ(test::run_once(imported, input), test::run_once(compiled_, input));

  auto a = compiled_.runtime_model();
  auto b = imported.runtime_model();
  ASSERT_EQ(a->nodes().size(), b->nodes().size());
  for (size_t i = 0; i < a->nodes().size(); ++i) {
    EXPECT_EQ(a->nodes()[i].name, b->nodes()[i].name);
    EXPECT_EQ(a->nodes()[i].op_type, b->nodes()[i].op_type);
    EXPECT_EQ(a->nodes()[i].attributes.all().size(), b->nodes()[i].attributes.all().size());
    EXPECT_EQ(a->nodes()[i].attributes.get_string("implementation"),
              b->nodes()[i].attributes.get_string("implementation"));
    using Names = std::vector<std::string>;
    EXPECT_EQ(std::get<Names>(a->nodes()[i].attributes.all().at("original_names")),
              std::get<Names>(b->nodes()[i].attributes.all().at("original_names")));
  }
  for (const char* key :
       {props::num_streams, props::inference_num_threads, props::performance_mode,
        props::inference_precision, props::max_requests_in_flight, props::enable_profiling})
    EXPECT_EQ(imported.get_property(key).as_string(), compiled_.get_property(key).as_string())
        << key;
}

TEST_F(CompiledBlob, TheTransformedGraphIsStoredNotTheSource) {
  // compile_graph fuses Conv + Relu (the post-op fusion pass): the blob holds the fused node and
  // the source nodes it stands for, and import does not transform again.
  auto runtime = import_blob(core_, blob_).runtime_model();
  std::vector<std::string> conv_sources;
  for (const Node& node : runtime->nodes())
    if (node.op_type == "Conv")
      conv_sources = std::get<std::vector<std::string>>(node.attributes.all().at("original_names"));
  if (model_->nodes().size() == runtime->nodes().size())
    GTEST_SKIP() << "no transformation changed this graph";
  EXPECT_LT(runtime->nodes().size(), model_->nodes().size());
  EXPECT_THAT(conv_sources, ElementsAre("conv", "relu"));
}

TEST_F(CompiledBlob, ExportIsDeterministic) {
  EXPECT_EQ(export_blob(compiled_), blob_);
}

TEST_F(CompiledBlob, HeaderRecordsVersionDeviceCpuAndConfiguration) {
  Core core;
  auto compiled = core.compile_model(model_, "CPU",
                                     {{props::performance_mode, "THROUGHPUT"},
                                      {props::num_streams, 2},
                                      {props::max_requests_in_flight, 5}});
  const std::string blob = export_blob(compiled);
  EXPECT_EQ(blob.substr(0, 8), "TROUPEBL");
  const serialization::BlobInfo info = info_of(blob);
  EXPECT_EQ(info.format_version, 1u);
  EXPECT_EQ(info.troupe_version, TROUPE_VERSION);
  EXPECT_EQ(info.troupe_version, "0.1.0");
  EXPECT_EQ(info.device, "CPU");
  EXPECT_EQ(info.model_name, "small_cnn");
  EXPECT_EQ(info.cpu_capabilities, detail::CpuPlugin::capabilities());
  EXPECT_EQ(info.config.mode, PerformanceMode::throughput);
  EXPECT_EQ(info.config.num_streams, 2);
  EXPECT_EQ(info.config.max_in_flight, 5);
  EXPECT_EQ(payload_offset_of(blob) % 64, 0u);
  EXPECT_EQ(info.payload_length, blob.size() - payload_offset_of(blob));

  // Import restores the stored configuration.
  auto imported = import_blob(core_, blob);
  EXPECT_EQ(imported.get_property(props::num_streams).as_int(), 2);
  EXPECT_EQ(imported.get_property(props::performance_mode).as_string(), "THROUGHPUT");
  EXPECT_EQ(imported.get_property(props::max_requests_in_flight).as_int(), 5);
}

TEST_F(CompiledBlob, ImportPropertiesMayChangeOnlyThePipeline) {
  auto profiled = import_blob(core_, blob_, {{props::enable_profiling, true}});
  EXPECT_TRUE(profiled.get_property(props::enable_profiling).as_bool());
  auto two_streams = import_blob(core_, blob_, {{props::num_streams, 2}});
  EXPECT_EQ(two_streams.get_property(props::num_streams).as_int(), 2);
  const Tensor input = test::small_cnn_input();
  EXPECT_EQ(test::run_once(two_streams, input), test::run_once(compiled_, input));
  // The same value as compiled is accepted; another one needs a new compilation.
  import_blob(core_, blob_, {{props::inference_precision, "f32"}});
  const auto host = detail::CpuPlugin::capabilities();
  if (std::find(host.begin(), host.end(), "BF16") != host.end()) {
    EXPECT_THAT(error_of<InvalidArgument>([&] {
                  import_blob(core_, blob_, {{props::inference_precision, "bf16"}});
                }),
                HasSubstr("INFERENCE_PRECISION_HINT = bf16 cannot be applied on import"));
  } else {
    // Without bf16 hardware a bf16 hint resolves to f32 (as in compile_model): no conflict.
    import_blob(core_, blob_, {{props::inference_precision, "bf16"}});
  }
  EXPECT_THAT(error_of<InvalidArgument>([&] {
                import_blob(core_, blob_, {{props::disable_transformations, true}});
              }),
              HasSubstr("DISABLE_TRANSFORMATIONS"));
  EXPECT_THROW(import_blob(core_, blob_, {{"NUM_STREAMZ", 2}}), UnknownProperty);
  std::istringstream in(blob_);
  EXPECT_THAT(error_of<InvalidArgument>([&] { core_.import_model(in, "GPU"); }),
              HasSubstr("unknown device 'GPU'"));
}

TEST_F(CompiledBlob, DynamicShapesSurviveTheRoundTrip) {
  ModelBuilder b("dynamic");
  auto x = b.input("x", ElementType::f32, {Shape::dynamic, 3});
  auto bias = b.constant("bias", Tensor::from_vector<float>({1, 3}, {1.f, -1.f, 0.5f}));
  b.output(b.op("Relu", {b.op("Add", {x, bias})}), "y");
  auto compiled = core_.compile_model(b.build());
  auto imported = import_blob(core_, export_blob(compiled));
  EXPECT_EQ(imported.inputs()[0].shape, Shape({Shape::dynamic, 3}));
  const Tensor x2 = Tensor::from_vector<float>({2, 3}, {0.f, 0.f, 0.f, -2.f, 2.f, 1.f});
  EXPECT_EQ(test::run_once(imported, x2), (std::vector<float>{1.f, 0.f, 0.5f, 0.f, 1.f, 1.5f}));
}

TEST_F(CompiledBlob, ImportReadsFromTheCurrentPositionAndStopsAfterTheBlob) {
  std::istringstream in("junk" + blob_ + "tail");
  in.seekg(4);
  core_.import_model(in);
  std::string rest;
  in >> rest;
  EXPECT_EQ(rest, "tail");
}

TEST_F(CompiledBlob, ImportFromAStreamThatCannotSeek) {
  ForwardOnlyBuf buf(blob_);
  std::istream in(&buf);
  auto imported = core_.import_model(in);
  const Tensor input = test::small_cnn_input();
  EXPECT_EQ(test::run_once(imported, input), test::run_once(compiled_, input));
  ForwardOnlyBuf cut(blob_.substr(0, blob_.size() - 3));
  std::istream cut_in(&cut);
  EXPECT_THAT(error_of<FormatError>([&] { core_.import_model(cut_in); }),
              HasSubstr("truncated at byte " + std::to_string(blob_.size() - 3)));
}

TEST_F(CompiledBlob, ABlobFileIsMappedAndItsWeightsUsedInPlace) {
  test::TempDir dir("blob_file");
  const std::string path = dir.file("m.blob");
  test::write_bytes(path, blob_);
  const auto caps = detail::CpuPlugin::capabilities();
  auto loaded = serialization::read_compiled_blob_file(path, "CPU", caps);
  const Model& model = *loaded.graph->model;
  const Tensor& fc_b = model.constants().at(*model.find_value("fc_b"));
  EXPECT_EQ(reinterpret_cast<uintptr_t>(fc_b.raw_data()) % 64, 0u);
  EXPECT_EQ(fc_b.to_vector<float>(), test::seeded_floats(10, 7 + 3));
  EXPECT_EQ(loaded.graph->implementations.size(), model.nodes().size());
  test::write_bytes(path, blob_.substr(0, blob_.size() - 1));
  EXPECT_THAT(
      error_of<FormatError>([&] { serialization::read_compiled_blob_file(path, "CPU", caps); }),
      HasSubstr("truncated at byte " + std::to_string(blob_.size() - 1)));
}

// ---- refusals -----------------------------------------------------------------------------------

TEST_F(CompiledBlob, RefusesWrongMagic) {
  std::string bad = blob_;
  bad.replace(0, 8, "NOTABLOB");
  EXPECT_THAT(import_refusal(bad), HasSubstr("magic is 'NOTABLOB', expected 'TROUPEBL'"));
  bad.replace(0, 8, "TROUPEMD");
  EXPECT_THAT(import_refusal(bad), HasSubstr("this is a .troupe model file"));
  EXPECT_THAT(import_refusal(""), HasSubstr("magic is missing (empty stream)"));
}

TEST_F(CompiledBlob, RefusesANewerFormatVersion) {
  std::string bad = blob_;
  bad[8] = 7;
  EXPECT_THAT(import_refusal(bad),
              HasSubstr("format version 7, newer than this troupe (0.1.0) reads (1)"));
  bad[8] = 0;
  EXPECT_THAT(import_refusal(bad),
              HasSubstr("format version 0, which this troupe no longer reads"));
}

TEST_F(CompiledBlob, RefusesAnotherTroupeVersion) {
  serialization::BlobInfo info = info_of(blob_);
  info.troupe_version = "0.0.9";
  const std::string bad = serialization::reseal_blob(info, serialization::blob_payload(blob_));
  EXPECT_THAT(import_refusal(bad), HasSubstr("made by troupe 0.0.9; this is troupe 0.1.0"));
}

TEST_F(CompiledBlob, RefusesAnotherDevice) {
  serialization::BlobInfo info = info_of(blob_);
  info.device = "GPU";
  const std::string bad = serialization::reseal_blob(info, serialization::blob_payload(blob_));
  EXPECT_THAT(import_refusal(bad), HasSubstr("compiled for device 'GPU', not 'CPU'"));
}

TEST_F(CompiledBlob, RefusesAMissingCpuCapability) {
  serialization::BlobInfo info = info_of(blob_);
  info.required_capabilities = {"FP32", "AMX_FP8_FUTURE"};
  const std::string bad = serialization::reseal_blob(info, serialization::blob_payload(blob_));
  const std::string msg = import_refusal(bad);
  EXPECT_THAT(msg, HasSubstr("needs CPU capabilities this CPU lacks: AMX_FP8_FUTURE ("));
  EXPECT_THAT(msg, HasSubstr("this CPU has: FP32"));
}

TEST(CompiledBlobIsa, Bf16AmxBlobIsRefusedOnACpuWithoutAmx) {
  // A blob as a Sapphire Rapids CPU writes it for bf16 inference (made here by changing the header
  // of an f32 blob, so the test runs on any CPU).
  Core core;
  auto compiled = core.compile_model(test::make_small_cnn());
  std::ostringstream out;
  compiled.export_model(out);
  const std::string f32_blob = out.str();
  serialization::BlobInfo info = info_of(f32_blob);
  info.config.inference_precision = ElementType::bf16;
  info.cpu_capabilities = {"FP32", "INT8", "EXPORT_IMPORT", "AVX512", "BF16", "AMX"};
  detail::CompiledGraph graph;
  graph.implementations = {"ref"};
  info.required_capabilities =
      serialization::required_capabilities(graph, info.config, info.cpu_capabilities);
  ASSERT_THAT(info.required_capabilities, ElementsAre("AMX", "AVX512", "BF16"));
  const std::string blob = serialization::reseal_blob(info, serialization::blob_payload(f32_blob));

  // An AVX-512 CPU without AMX and BF16.
  std::istringstream in(blob);
  const std::string msg = error_of<FormatError>([&] {
    serialization::read_compiled_blob(in, "CPU", {"FP32", "INT8", "EXPORT_IMPORT", "AVX512"});
  });
  EXPECT_THAT(msg, HasSubstr("needs CPU capabilities this CPU lacks: AMX, BF16"));
  EXPECT_THAT(msg, HasSubstr("compiled for bf16 inference on a CPU with: FP32, INT8, "
                             "EXPORT_IMPORT, AVX512, BF16, AMX;"));
  EXPECT_THAT(msg, HasSubstr("compiled for bf16 inference"));
  // A CPU with only BF16 (e.g. Cooper Lake) still lacks AMX.
  std::istringstream again(blob);
  EXPECT_THAT(error_of<FormatError>([&] {
                serialization::read_compiled_blob(again, "CPU", {"FP32", "AVX512", "BF16"});
              }),
              HasSubstr("lacks: AMX ("));
  // And through Core on this machine, when it lacks them.
  const auto host = detail::CpuPlugin::capabilities();
  if (std::find(host.begin(), host.end(), "AMX") == host.end()) {
    std::istringstream here(blob);
    EXPECT_THAT(error_of<FormatError>([&] { core.import_model(here); }), HasSubstr("lacks: AMX"));
  }
}

TEST(CompiledBlobIsa, RealBf16BlobImportsOnThisCpu) {
  const auto host = detail::CpuPlugin::capabilities();
  const bool has_bf16 = std::find(host.begin(), host.end(), "BF16") != host.end();
  if (!has_bf16) GTEST_SKIP() << "this CPU cannot compile for bf16";
  Core core;
  auto compiled =
      core.compile_model(test::make_small_cnn(), "CPU", {{props::inference_precision, "bf16"}});
  ASSERT_EQ(compiled.get_property(props::inference_precision).as_string(), "bf16");
  std::ostringstream out;
  compiled.export_model(out);
  const std::string blob = out.str();
  const auto info = info_of(blob);
  EXPECT_THAT(info.required_capabilities, ::testing::Contains(std::string("BF16")));
  const bool has_amx = std::find(host.begin(), host.end(), "AMX") != host.end();
  if (has_amx) {
    EXPECT_THAT(info.required_capabilities, ::testing::Contains(std::string("AMX")));
  }

  // The same blob on a CPU like this one without BF16/AMX (an AVX-512 CPU keeps its AVX2 and
  // VNNI, which a blob with blocked layouts or VNNI kernels may need as well).
  std::vector<std::string> without_bf16;
  for (const auto& cap : host)
    if (cap != "BF16" && cap != "AMX") without_bf16.push_back(cap);
  std::istringstream in(blob);
  const std::string msg = error_of<FormatError>(
      [&] { serialization::read_compiled_blob(in, "CPU", without_bf16); });
  EXPECT_THAT(msg, HasSubstr(has_amx ? "lacks: AMX, BF16" : "lacks: BF16"));
  EXPECT_THAT(msg, HasSubstr("compiled for bf16 inference"));
  // On this CPU it imports and runs.
  std::istringstream again(blob);
  auto imported = core.import_model(again);
  EXPECT_EQ(imported.get_property(props::inference_precision).as_string(), "bf16");
  const Tensor input = test::small_cnn_input();
  EXPECT_EQ(test::run_once(imported, input), test::run_once(compiled, input));
}

TEST(CompiledBlobIsa, RequiredCapabilitiesFollowPrecisionAndKernels) {
  detail::CompiledGraph graph;
  graph.blocked_layouts = false;  // first what the implementations and the precision need
  detail::CompileConfig f32;
  graph.implementations = {"ref", "ref"};
  EXPECT_TRUE(serialization::required_capabilities(graph, f32, {"FP32", "AVX512", "AMX"}).empty());
  graph.implementations = {"ref", "dnnl:brg:avx512_core_amx", "dnnl:jit:avx512_core"};
  EXPECT_THAT(serialization::required_capabilities(graph, f32, {}), ElementsAre("AMX", "AVX512"));
  detail::CompileConfig bf16;
  bf16.inference_precision = ElementType::bf16;
  graph.implementations = {"ref"};
  EXPECT_THAT(serialization::required_capabilities(graph, bf16, {"FP32", "BF16"}),
              ElementsAre("BF16"));
  EXPECT_THAT(serialization::required_capabilities(graph, bf16, {"FP32", "BF16", "AMX"}),
              ElementsAre("AMX", "BF16"));
  // A graph whose fusions and layouts were planned for the compiling ISA needs that ISA, also
  // where no implementation names it (a dynamic model's kernels are prepared at run time).
  graph.implementations = {"dynamic"};
  graph.blocked_layouts = true;
  EXPECT_THAT(serialization::required_capabilities(graph, f32, {"FP32", "AVX2", "AVX512"}),
              ElementsAre("AVX2", "AVX512"));
  EXPECT_THAT(serialization::required_capabilities(graph, f32, {"FP32", "AVX2"}),
              ElementsAre("AVX2"));
  graph.blocked_layouts = false;  // DISABLE_TRANSFORMATIONS: plain layouts, nothing planned
  EXPECT_TRUE(serialization::required_capabilities(graph, f32, {"FP32", "AVX2"}).empty());
}

TEST_F(CompiledBlob, RefusesAFlippedPayloadByte) {
  std::string bad = blob_;
  const size_t payload_start = payload_offset_of(blob_);
  for (size_t offset : {payload_start, payload_start + 100, bad.size() - 1}) {
    bad[offset] ^= 0x04;
    const std::string msg = import_refusal(bad);
    EXPECT_THAT(msg, HasSubstr("payload checksum mismatch")) << offset;
    EXPECT_THAT(msg, HasSubstr("over bytes [" + std::to_string(payload_start) + ", " +
                               std::to_string(blob_.size()) + ")"));
    bad[offset] ^= 0x04;
  }
}

TEST_F(CompiledBlob, RefusesAFlippedHeaderByte) {
  std::string bad = blob_;
  bad[24 + header_length_of(blob_) / 2] ^= 0x01;
  EXPECT_THAT(import_refusal(bad), HasSubstr("header checksum mismatch"));
}

TEST_F(CompiledBlob, RefusesNonZeroPaddingAfterTheHeader) {
  const uint64_t header_end = 24 + header_length_of(blob_);
  ASSERT_LT(header_end, payload_offset_of(blob_)) << "no padding in this blob to test";
  std::string bad = blob_;
  bad[header_end] = 1;
  EXPECT_THAT(import_refusal(bad), HasSubstr("padding byte " + std::to_string(header_end) +
                                             " after the header is not zero"));
}

TEST_F(CompiledBlob, TruncationAtEveryByteNamesTheByte) {
  const uint64_t header_end = payload_offset_of(blob_);
  for (size_t n = 0; n < blob_.size(); ++n) {
    const std::string msg = import_refusal(blob_.substr(0, n));
    if (n == 0) {
      EXPECT_THAT(msg, HasSubstr("magic is missing"));
      continue;
    }
    ASSERT_THAT(msg, HasSubstr("truncated at byte " + std::to_string(n) + ":")) << n;
    if (n < 24)
      EXPECT_THAT(msg, HasSubstr("the envelope header needs bytes [0, 24)"));
    else if (n < header_end)
      EXPECT_THAT(msg,
                  HasSubstr("the header needs bytes [24, " + std::to_string(header_end) + ")"));
    else
      EXPECT_THAT(msg, HasSubstr("the payload needs bytes [" + std::to_string(header_end) + ", " +
                                 std::to_string(blob_.size()) + ")"));
  }
}

// ---- robustness ---------------------------------------------------------------------------------

// Rounds of a fuzz test: `fallback` in the unit tests, more with TROUPE_FUZZ_ROUNDS=N (a longer
// fuzzing run, e.g. in a -DTROUPE_SANITIZE=address build).
size_t fuzz_rounds(size_t fallback) {
  const char* env = std::getenv("TROUPE_FUZZ_ROUNDS");
  return env ? static_cast<size_t>(std::strtoull(env, nullptr, 10)) : fallback;
}

// Seed of a fuzz test: `fallback`, or TROUPE_FUZZ_SEED=N to explore other mutations.
uint64_t fuzz_seed(uint64_t fallback) {
  const char* env = std::getenv("TROUPE_FUZZ_SEED");
  return env ? std::strtoull(env, nullptr, 10) : fallback;
}

// Imports `blob` and, when that succeeds, makes a request: either works or throws troupe::Error.
// Returns whether the import succeeded. Anything else (another exception, a crash) fails the test.
bool import_survives(Core& core, const std::string& blob, size_t round) {
  try {
    auto compiled = import_blob(core, blob);
    compiled.create_infer_request();
    return true;
  } catch (const Error&) {
    return false;
  } catch (const std::exception& e) {
    ADD_FAILURE() << "round " << round << ": import threw a non-troupe exception: " << e.what();
    return false;
  }
}

TEST_F(CompiledBlob, FuzzRandomCorruptionNeverCrashes) {
  std::mt19937_64 rng(fuzz_seed(20240611));
  size_t accepted = 0;
  const size_t rounds = fuzz_rounds(3000);
  for (size_t round = 0; round < rounds; ++round) {
    std::string bad = blob_;
    switch (rng() % 4) {
      case 0:  // flip a few bits anywhere
        for (int k = 0, n = 1 + static_cast<int>(rng() % 4); k < n; ++k)
          bad[rng() % bad.size()] ^= static_cast<char>(1u << (rng() % 8));
        break;
      case 1:  // overwrite a few bytes in the envelope
        for (int k = 0, n = 1 + static_cast<int>(rng() % 3); k < n; ++k)
          bad[rng() % std::min<size_t>(bad.size(), 24 + header_length_of(blob_))] =
              static_cast<char>(rng());
        break;
      case 2:  // truncate
        bad.resize(rng() % bad.size());
        break;
      case 3:  // insert or delete a run of bytes
        if (rng() % 2) {
          bad.insert(rng() % bad.size(), std::string(1 + rng() % 16, static_cast<char>(rng())));
        } else {
          const size_t at = rng() % bad.size();
          bad.erase(at, 1 + rng() % 16);
        }
        break;
    }
    if (import_survives(core_, bad, round)) {
      ++accepted;
      // Checksums cover every byte of the blob, so an accepted stream must hold the blob intact
      // (e.g. zeros inserted into trailing zero padding only push bytes past its end).
      EXPECT_EQ(bad.substr(0, blob_.size()), blob_) << "round " << round;
    }
  }
  std::cout << "raw fuzz: " << accepted << " of " << rounds << " mutated streams imported\n";
}

TEST_F(CompiledBlob, FuzzPayloadBehindAValidChecksumNeverCrashes) {
  // Mutations the checksum cannot see (the checksum is recomputed), so the payload parser, the
  // graph checks and validation are what stand between a bad blob and the kernels.
  const serialization::BlobInfo info = info_of(blob_);
  const std::string payload = serialization::blob_payload(blob_);
  const uint64_t graph_end =
      8 + serialization::get_le(reinterpret_cast<const unsigned char*>(payload.data()), 8);
  std::mt19937_64 rng(fuzz_seed(7));
  size_t accepted = 0;
  const size_t rounds = fuzz_rounds(1500);
  for (size_t round = 0; round < rounds; ++round) {
    std::string bad = payload;
    const int kind = static_cast<int>(rng() % 3);
    if (kind == 0) {  // bit flips in the graph message
      for (int k = 0, n = 1 + static_cast<int>(rng() % 3); k < n; ++k)
        bad[rng() % graph_end] ^= static_cast<char>(1u << (rng() % 8));
    } else if (kind == 1) {  // random bytes in the graph message
      bad[rng() % graph_end] = static_cast<char>(rng());
    } else {  // truncate the payload
      bad.resize(rng() % bad.size());
    }
    if (import_survives(core_, serialization::reseal_blob(info, bad), round)) ++accepted;
  }
  // Some mutations are harmless (a changed weight, a renamed node); most are refused.
  EXPECT_LT(accepted, rounds);
  std::cout << "payload fuzz: " << accepted << " of " << rounds << " mutated blobs imported\n";
}

}  // namespace
}  // namespace troupe

namespace troupe {
namespace {

// With TROUPE_BENCH_MODELS set (see benchmarks/make_serialization_models.py): every ONNX model
// there gives bit-identical outputs read from ONNX, from its .troupe copy and imported as a blob.
TEST(LargeModels, OnnxTroupeAndBlobGiveTheSameOutputs) {
  const char* dir = std::getenv("TROUPE_BENCH_MODELS");
  if (!dir) GTEST_SKIP() << "set TROUPE_BENCH_MODELS to a directory of .onnx models";
  test::TempDir work("large_models");
  Core core;
  size_t models = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    if (entry.path().extension() != ".onnx") continue;
    ++models;
    SCOPED_TRACE(entry.path().string());
    auto from_onnx = core.read_model(entry.path().string());
    const std::string troupe_path = work.file("m.troupe");
    save_model(from_onnx, troupe_path);
    auto from_troupe = core.read_model(troupe_path);
    auto a = core.compile_model(from_onnx);
    auto b = core.compile_model(from_troupe);
    auto c = import_blob(core, export_blob(a));
    const ValueInfo& in = a.inputs()[0];
    const Tensor input = Tensor::from_vector<float>(
        in.shape, test::seeded_floats(static_cast<size_t>(in.shape.element_count()), 5));
    const auto expected = test::run_once(a, input);
    EXPECT_EQ(test::run_once(b, input), expected);
    EXPECT_EQ(test::run_once(c, input), expected);
  }
  EXPECT_GT(models, 0u);
}

}  // namespace
}  // namespace troupe
