// A plain mutation fuzzer for the ONNX reader. Valid small models are mutated with fixed seeds,
// byte by byte (bit flips, overwrites, inserted and deleted bytes, truncation, copied chunks,
// extreme varints) and field by field (element types, dimensions, attributes, names, external data,
// opsets, so that inputs get past the protobuf parser), and every result must either read or throw
// troupe::Error: never crash, exhaust memory or throw anything else. Inputs that once did are kept
// in tests/serialization/data/onnx_fuzz/ and replayed.
//
// TROUPE_FUZZ_ITERATIONS=N runs N mutations per seed model instead of the default smoke run and
// TROUPE_FUZZ_SEED=S starts the random streams at S (default 1000) to explore other inputs;
// TROUPE_FUZZ_DUMP=DIR writes each input to DIR/current.onnx before reading it, so the input of a
// crash can be kept.

#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <random>

#include "serialization/onnx_reader.hpp"
#include "tests/serialization/onnx_test_models.hpp"
#include "troupe/error.hpp"

namespace troupe {
namespace {

namespace fs = std::filesystem;
using namespace troupe::serialization;
using namespace troupe::testing;

// Valid models covering the reader's paths: initializers, Constant nodes, typed fields, attributes
// of several types, optional inputs, symbolic dimensions.
std::vector<std::string> seed_models() {
  std::vector<std::string> seeds;
  seeds.push_back(serialize(onnx_add_relu_model()));

  auto conv = onnx_model(11);
  onnx_input(conv, "x", onnx::TensorProto::FLOAT, {"batch", 1, 4, 4});
  *conv.mutable_graph()->add_initializer() =
      onnx_raw_f32("w", {2, 1, 2, 2}, std::vector<float>(8, 0.5f));
  auto* c = onnx_node(conv, "Conv", {"x", "w"}, {"c"}, "conv");
  onnx_ints_attribute(c, "strides", {1, 1});
  onnx_ints_attribute(c, "pads", {0, 0, 1, 1});
  auto* leaky = onnx_node(conv, "LeakyRelu", {"c"}, {"l"}, "leaky");
  onnx_float_attribute(leaky, "alpha", 0.1f);
  auto* flat = onnx_node(conv, "Flatten", {"l"}, {"y"}, "flatten");
  onnx_int_attribute(flat, "axis", 1);
  onnx_output(conv, "y", onnx::TensorProto::FLOAT, {"batch", 32});
  seeds.push_back(serialize(conv));

  auto consts = onnx_model(13);
  onnx_input(consts, "x", onnx::TensorProto::FLOAT, {2, 3});
  auto* k = onnx_node(consts, "Constant", {}, {"shape"});
  onnx_ints_attribute(k, "value_ints", {3, 2});
  auto* f = onnx_node(consts, "Constant", {}, {"lo"});
  onnx_float_attribute(f, "value_float", -1.f);
  auto* ints = consts.mutable_graph()->add_initializer();
  ints->set_name("unused_i64");
  ints->set_data_type(onnx::TensorProto::INT64);
  ints->add_dims(2);
  ints->add_int64_data(7);
  ints->add_int64_data(-7);
  auto* halves = consts.mutable_graph()->add_initializer();
  halves->set_name("unused_f16");
  halves->set_data_type(onnx::TensorProto::FLOAT16);
  halves->add_dims(1);
  halves->add_int32_data(0x3C00);
  onnx_node(consts, "Reshape", {"x", "shape"}, {"r"}, "reshape");
  onnx_node(consts, "Clip", {"r", "lo", ""}, {"y"}, "clip");
  onnx_output(consts, "y", onnx::TensorProto::FLOAT, {3, 2});
  seeds.push_back(serialize(consts));
  return seeds;
}

class Mutator {
 public:
  explicit Mutator(uint32_t seed) : rng_(seed) {}

  std::string mutate(std::string bytes, const std::vector<std::string>& corpus) {
    const int rounds = 1 + static_cast<int>(below(4));
    for (int r = 0; r < rounds; ++r) apply_one(bytes, corpus);
    return bytes;
  }

 private:
  size_t below(size_t n) {
    return n == 0 ? 0 : std::uniform_int_distribution<size_t>(0, n - 1)(rng_);
  }

  void apply_one(std::string& b, const std::vector<std::string>& corpus) {
    switch (below(8)) {
      case 0:  // flip one bit
        if (!b.empty()) b[below(b.size())] ^= static_cast<char>(1u << below(8));
        break;
      case 1:  // overwrite a byte
        if (!b.empty()) b[below(b.size())] = static_cast<char>(below(256));
        break;
      case 2:  // insert random bytes
        b.insert(below(b.size() + 1), std::string(1 + below(4), static_cast<char>(below(256))));
        break;
      case 3:  // delete a range
        if (!b.empty()) {
          size_t at = below(b.size());
          b.erase(at, 1 + below(std::min<size_t>(8, b.size() - at)));
        }
        break;
      case 4:  // truncate
        b.resize(below(b.size() + 1));
        break;
      case 5: {  // an extreme varint (huge length, negative number) at a random place
        static const char* const varints[] = {"\xff\xff\xff\xff\x0f",
                                              "\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01",
                                              "\x80\x80\x80\x80\x08", "\x00", "\x7f"};
        std::string v = varints[below(5)];
        if (!b.empty()) b.replace(below(b.size()), std::min(v.size(), b.size()), v);
        break;
      }
      case 6: {  // copy a chunk of this input elsewhere
        if (b.size() < 2) break;
        size_t from = below(b.size());
        std::string chunk = b.substr(from, 1 + below(std::min<size_t>(32, b.size() - from)));
        b.insert(below(b.size() + 1), chunk);
        break;
      }
      case 7: {  // splice in a chunk of another seed
        const std::string& other = corpus[below(corpus.size())];
        size_t from = below(other.size());
        std::string chunk =
            other.substr(from, 1 + below(std::min<size_t>(64, other.size() - from)));
        if (!b.empty()) b.replace(below(b.size()), std::min(chunk.size(), b.size()), chunk);
        break;
      }
    }
  }

  std::mt19937 rng_;
};

// Mutates a model at the protobuf level (types, shapes, attributes, names, external data, opsets),
// so that inputs get past the parser and exercise the reader's conversion and validation.
class ProtoMutator {
 public:
  explicit ProtoMutator(uint32_t seed) : rng_(seed) {}

  onnx::ModelProto mutate(onnx::ModelProto m) {
    const int rounds = 1 + static_cast<int>(below(3));
    for (int r = 0; r < rounds; ++r) apply_one(m);
    return m;
  }

 private:
  size_t below(size_t n) {
    return n == 0 ? 0 : std::uniform_int_distribution<size_t>(0, n - 1)(rng_);
  }

  int64_t extreme_int() {
    static const int64_t values[] = {0,         1,         -1,        2,        3,
                                     -2,        7,         255,       1 << 20,  int64_t{1} << 40,
                                     INT64_MAX, INT64_MIN, INT32_MAX, INT32_MIN};
    return values[below(sizeof values / sizeof values[0])];
  }

  std::string some_name(const onnx::ModelProto& m) {
    const auto& g = m.graph();
    switch (below(5)) {
      case 0:
        return "";
      case 1:
        return "no_such_value";
      case 2:
        if (g.input_size()) return g.input(static_cast<int>(below(g.input_size()))).name();
        return "x";
      case 3:
        if (g.initializer_size())
          return g.initializer(static_cast<int>(below(g.initializer_size()))).name();
        return "w";
      default:
        if (g.node_size()) {
          const auto& n = g.node(static_cast<int>(below(g.node_size())));
          if (n.output_size()) return n.output(0);
        }
        return "y";
    }
  }

  void mutate_tensor(onnx::TensorProto& t) {
    switch (below(7)) {
      case 0:
        t.set_data_type(static_cast<int32_t>(below(20)));
        break;
      case 1:
        if (t.dims_size())
          t.set_dims(static_cast<int>(below(t.dims_size())), extreme_int());
        else
          t.add_dims(extreme_int());
        break;
      case 2:
        t.add_dims(static_cast<int64_t>(below(4)));
        break;
      case 3:
        t.mutable_raw_data()->resize(below(t.raw_data().size() + 9));
        break;
      case 4: {
        t.set_data_location(onnx::TensorProto::EXTERNAL);
        static const char* const locations[] = {
            "w.bin", "missing.bin", "../w.bin", "/etc/hostname", "", "sub/../w.bin", "."};
        auto* e = t.add_external_data();
        e->set_key(below(4) ? "location" : "offset");
        e->set_value(below(4) ? locations[below(7)] : std::to_string(extreme_int()));
        if (below(2)) {
          auto* o = t.add_external_data();
          o->set_key(below(2) ? "offset" : "length");
          o->set_value(below(3) ? std::to_string(below(80)) : std::to_string(extreme_int()));
        }
        break;
      }
      case 5:
        t.clear_raw_data();
        t.add_float_data(1.f);
        t.add_int32_data(static_cast<int32_t>(extreme_int()));
        break;
      default:
        t.add_int64_data(extreme_int());
        break;
    }
  }

  void mutate_attribute(onnx::AttributeProto& a) {
    switch (below(6)) {
      case 0:
        a.set_type(static_cast<onnx::AttributeProto::AttributeType>(below(15)));
        break;
      case 1:
        a.set_i(extreme_int());
        break;
      case 2:
        a.add_ints(extreme_int());
        break;
      case 3:
        a.set_f(below(2) ? std::numeric_limits<float>::quiet_NaN() : -1e30f);
        break;
      case 4:
        mutate_tensor(*a.mutable_t());
        break;
      default:
        a.set_s(below(2) ? "" : "SAME_UPPER");
        break;
    }
  }

  void apply_one(onnx::ModelProto& m) {
    auto* g = m.mutable_graph();
    switch (below(12)) {
      case 0:
        m.set_ir_version(static_cast<int64_t>(below(12)));
        break;
      case 1:
        if (m.opset_import_size()) {
          auto* o = m.mutable_opset_import(0);
          if (below(4) == 0) o->set_domain(below(2) ? "ai.onnx" : "com.example");
          o->set_version(static_cast<int64_t>(below(25)));
        }
        break;
      case 2:
        if (g->initializer_size())
          mutate_tensor(*g->mutable_initializer(static_cast<int>(below(g->initializer_size()))));
        break;
      case 3:
        if (g->input_size()) {
          auto* t = g->mutable_input(static_cast<int>(below(g->input_size())))
                        ->mutable_type()
                        ->mutable_tensor_type();
          switch (below(4)) {
            case 0:
              t->set_elem_type(static_cast<int32_t>(below(20)));
              break;
            case 1:
              t->clear_shape();
              break;
            case 2:
              t->mutable_shape()->add_dim()->set_dim_value(extreme_int());
              break;
            default:
              if (t->shape().dim_size())
                t->mutable_shape()
                    ->mutable_dim(static_cast<int>(below(t->shape().dim_size())))
                    ->set_dim_value(extreme_int());
              break;
          }
        }
        break;
      case 4:
      case 5:
        if (g->node_size()) {
          auto* n = g->mutable_node(static_cast<int>(below(g->node_size())));
          if (n->attribute_size()) {
            mutate_attribute(*n->mutable_attribute(static_cast<int>(below(n->attribute_size()))));
          } else {
            auto* a = n->add_attribute();
            a->set_name(below(2) ? "axis" : "value");
            mutate_attribute(*a);
          }
        }
        break;
      case 6:
        if (g->node_size()) {
          auto* n = g->mutable_node(static_cast<int>(below(g->node_size())));
          static const char* const ops[] = {"Relu",  "Add",      "Constant", "Conv",   "Reshape",
                                            "Clip",  "Identity", "Gemm",     "Concat", "Unknown",
                                            "Split", "Softmax",  "Squeeze",  "Slice",  "If"};
          n->set_op_type(ops[below(sizeof ops / sizeof ops[0])]);
        }
        break;
      case 7:
        if (g->node_size()) {
          auto* n = g->mutable_node(static_cast<int>(below(g->node_size())));
          if (below(2) && n->input_size())
            n->set_input(static_cast<int>(below(n->input_size())), some_name(m));
          else
            n->add_input(some_name(m));
        }
        break;
      case 8:
        if (g->node_size()) {
          auto* n = g->mutable_node(static_cast<int>(below(g->node_size())));
          if (below(2) && n->output_size())
            n->set_output(static_cast<int>(below(n->output_size())), some_name(m));
          else
            n->add_output(some_name(m));
        }
        break;
      case 9:  // drop or duplicate a node
        if (g->node_size()) {
          int i = static_cast<int>(below(g->node_size()));
          if (below(2)) {
            g->mutable_node()->DeleteSubrange(i, 1);
          } else {
            onnx::NodeProto copy = g->node(i);
            *g->add_node() = copy;
          }
        }
        break;
      case 10:
        if (g->output_size()) {
          if (below(3) == 0)
            g->clear_output();
          else
            g->mutable_output(static_cast<int>(below(g->output_size())))->set_name(some_name(m));
        }
        break;
      default:  // a value used as two things at once
        if (g->initializer_size() && g->input_size())
          g->mutable_initializer(0)->set_name(g->input(0).name());
        break;
    }
  }

  std::mt19937 rng_;
};

// A directory holding "w.bin" (64 bytes), the base for external data locations the mutations make.
const std::string& external_data_dir() {
  static const TempDir dir;
  static const std::string path = [] {
    dir.write("w.bin", std::string(64, '\x01'));
    return dir.path().string();
  }();
  return path;
}

// How the mutated inputs fared, to see that mutations get past the protobuf parser.
struct Outcomes {
  int read = 0, format_error = 0, unsupported = 0, model_error = 0, other_error = 0;
};

// Reads `bytes`; a troupe::Error is a fine outcome, anything else fails the test.
void read_must_not_misbehave(const std::string& bytes, const std::string& label,
                             Outcomes* outcomes = nullptr) {
  if (const char* dump = std::getenv("TROUPE_FUZZ_DUMP")) {
    std::ofstream(fs::path(dump) / "current.onnx", std::ios::binary) << bytes;
  }
  Outcomes ignored;
  Outcomes& o = outcomes ? *outcomes : ignored;
  try {
    auto model = read_onnx_model_from_buffer(bytes.data(), bytes.size(), external_data_dir());
    ASSERT_TRUE(model != nullptr) << label;
    ++o.read;
  } catch (const FormatError&) {
    ++o.format_error;
  } catch (const UnsupportedOperation&) {
    ++o.unsupported;
  } catch (const ModelError&) {
    ++o.model_error;
  } catch (const Error&) {
    ++o.other_error;
  } catch (const std::exception& e) {
    FAIL() << label << ": threw a non-troupe exception: " << e.what();
  } catch (...) {
    FAIL() << label << ": threw a non-exception";
  }
}

TEST(OnnxReaderFuzz, SeedModelsRead) {
  for (const auto& seed : seed_models())
    EXPECT_NO_THROW(read_onnx_model_from_buffer(seed.data(), seed.size()));
}

TEST(OnnxReaderFuzz, RegressionInputsDoNotCrash) {
  const fs::path dir = fs::path(TROUPE_SOURCE_DIR) / "tests/serialization/data/onnx_fuzz";
  ASSERT_TRUE(fs::is_directory(dir)) << dir;
  int count = 0;
  for (const auto& entry : fs::directory_iterator(dir)) {
    if (entry.path().extension() != ".onnx") continue;
    std::ifstream in(entry.path(), std::ios::binary);
    std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    read_must_not_misbehave(bytes, entry.path().filename().string());
    ++count;
  }
  EXPECT_GT(count, 0);
}

TEST(OnnxReaderFuzz, SeededMutationsReadOrThrowTroupeErrors) {
  int iterations = 1500;
  if (const char* n = std::getenv("TROUPE_FUZZ_ITERATIONS")) iterations = std::atoi(n);
  uint32_t first_seed = 1000;
  if (const char* n = std::getenv("TROUPE_FUZZ_SEED"))
    first_seed = static_cast<uint32_t>(std::atol(n));
  const auto corpus = seed_models();
  Outcomes outcomes;
  for (size_t s = 0; s < corpus.size(); ++s) {
    Mutator bytes(first_seed + static_cast<uint32_t>(s));
    ProtoMutator fields(first_seed + 1000 + static_cast<uint32_t>(s));
    onnx::ModelProto seed;
    ASSERT_TRUE(seed.ParseFromString(corpus[s]));
    for (int i = 0; i < iterations; ++i) {
      // Half the inputs are mutated field by field, a quarter of those also byte by byte; the
      // other half byte by byte only.
      std::string input;
      if (i % 2 == 0) {
        input = serialize(fields.mutate(seed));
        if (i % 8 == 0) input = bytes.mutate(input, corpus);
      } else {
        input = bytes.mutate(corpus[s], corpus);
      }
      read_must_not_misbehave(
          input, "seed model " + std::to_string(s) + ", iteration " + std::to_string(i), &outcomes);
      if (HasFatalFailure()) return;
    }
  }
  std::printf(
      "mutated inputs: %d read, %d FormatError, %d UnsupportedOperation, %d ModelError, "
      "%d other troupe errors\n",
      outcomes.read, outcomes.format_error, outcomes.unsupported, outcomes.model_error,
      outcomes.other_error);
  // Most mutations must get past the protobuf parser, or the fuzzer only tests protobuf.
  const int total = iterations * static_cast<int>(corpus.size());
  EXPECT_GT(outcomes.read + outcomes.unsupported + outcomes.model_error, total * 4 / 10);
}

}  // namespace
}  // namespace troupe
