// Models that take or give strings (ONNX STRING, the element type ElementType::string): numbers
// to text and back with Cast, StringNormalizer, with many requests in flight on several streams;
// a string that is not a number fails only its own request; an op without a string kernel is
// refused when the model is built, naming the node.

#include <gmock/gmock.h>

#include <cmath>
#include <limits>
#include <thread>

#include "pipeline_fixture.hpp"

using namespace troupe;
using namespace troupe::test;
using ::testing::HasSubstr;

namespace {

constexpr int64_t onnx_string = 8, onnx_float = 1;

std::shared_ptr<Model> numbers_to_text() {
  ModelBuilder b("numbers_to_text");
  auto x = b.input("x", ElementType::f32, {Shape::dynamic});
  b.output(b.op("Cast", {x}, {{"to", onnx_string}}, "to_text"), "text");
  return b.build();
}

std::shared_ptr<Model> text_to_numbers() {
  ModelBuilder b("text_to_numbers");
  auto x = b.input("text", ElementType::string, {Shape::dynamic});
  b.output(b.op("Cast", {x}, {{"to", onnx_float}}, "to_number"), "y");
  return b.build();
}

// Drops "the" and "a" whatever their case, then upper-cases what is left.
std::shared_ptr<Model> normalizer(const std::string& action = "UPPER") {
  ModelBuilder b("normalizer");
  auto x = b.input("words", ElementType::string, {1, Shape::dynamic});
  b.output(b.op("StringNormalizer", {x},
                {{"case_change_action", action},
                 {"is_case_sensitive", int64_t{0}},
                 {"stopwords", std::vector<std::string>{"the", "a"}}},
                "normalize"),
           "kept");
  return b.build();
}

std::vector<std::string> sentence(int seed) {
  static const std::vector<std::string> words = {"The",   "quick", "a",    "fox", "THE",
                                                 "jumps", "A",     "over", "dog"};
  std::vector<std::string> out;
  for (int i = 0; i <= seed % 7; ++i) out.push_back(words[static_cast<size_t>((seed + i * 5) % 9)]);
  return out;
}

std::vector<std::string> expected_kept(const std::vector<std::string>& words) {
  std::vector<std::string> out;
  for (std::string w : words) {
    std::string lower = w;
    for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    if (lower == "the" || lower == "a") continue;
    for (char& c : w) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    out.push_back(w);
  }
  if (out.empty()) out.emplace_back();  // an emptied row is one empty string
  return out;
}

}  // namespace

TEST(StringModels, NumbersBecomeTheTextNumPyWritesAndReadBackExactly) {
  Core core;
  auto to_text = core.compile_model(numbers_to_text(), "CPU");
  const float inf = std::numeric_limits<float>::infinity();
  const std::vector<float> x = {0.1f,         1.f,           -0.f,    1e-5f,     1e-4f,
                                123456789.f,  1e16f,         1.5e20f, -inf,      std::nanf(""),
                                0.039187793f, 3.4028235e38f, 1e15f,   12345678.f};
  auto request = to_text.create_infer_request();
  request.set_tensor("x", Tensor::from_vector<float>({static_cast<int64_t>(x.size())}, x));
  request.infer();
  const std::vector<std::string> text = request.get_tensor("text").to_vector<std::string>();
  // (float32's 1e-4 is just below 1e-4: NumPy writes it in scientific form.)
  EXPECT_EQ(text, (std::vector<std::string>{"0.1", "1.0", "-0.0", "1e-05", "1e-04", "123456790.0",
                                            "1e+16", "1.5e+20", "-inf", "nan", "0.039187793",
                                            "3.4028235e+38", "1000000000000000.0", "12345678.0"}));
  // Shortest text that reads back to the same float: every one of many values round-trips.
  std::vector<float> many(997);
  for (size_t i = 0; i < many.size(); ++i)
    many[i] = std::ldexp(std::sin(static_cast<float>(i)) * 1.2345f, static_cast<int>(i % 90) - 45);
  request.set_tensor("x", Tensor::from_vector<float>({997}, many));
  request.infer();
  auto to_numbers = core.compile_model(text_to_numbers(), "CPU");
  auto back = to_numbers.create_infer_request();
  back.set_tensor("text", request.get_tensor("text"));
  back.infer();
  EXPECT_EQ(back.get_tensor("y").to_vector<float>(), many);
  back.set_tensor("text", Tensor::from_vector<std::string>({4}, {"NaN", "+INF", "-INF", " 2.5"}));
  back.infer();
  const auto y = back.get_tensor("y").to_vector<float>();
  EXPECT_TRUE(std::isnan(y[0]));
  EXPECT_EQ(y[1], inf);
  EXPECT_EQ(y[2], -inf);
  EXPECT_EQ(y[3], 2.5f);
}

TEST(StringModels, ATextThatIsNoNumberFailsOnlyItsOwnRequest) {
  Core core;
  auto compiled = core.compile_model(
      text_to_numbers(), "CPU", {{props::performance_mode, "THROUGHPUT"}, {props::num_streams, 2}});
  std::vector<InferRequest> requests;
  for (int i = 0; i < 16; ++i) {
    requests.push_back(compiled.create_infer_request());
    const std::string value = i == 5 ? "12abc" : std::to_string(i) + ".5";
    requests.back().set_tensor("text", Tensor::from_vector<std::string>({2}, {"1", value}));
  }
  for (auto& r : requests) r.start_async();
  for (int i = 0; i < 16; ++i) {
    auto& r = requests[static_cast<size_t>(i)];
    if (i == 5) {
      try {
        r.wait();
        ADD_FAILURE() << "'12abc' was read as a number";
      } catch (const ExecutionError& e) {
        EXPECT_THAT(e.what(), HasSubstr("Cast node 'to_number'"));
        EXPECT_THAT(e.what(), HasSubstr("element 1 of input 0 ('12abc') is not a f32"));
      }
      continue;
    }
    r.wait();
    EXPECT_EQ(r.get_tensor("y").to_vector<float>(), (std::vector<float>{1.f, i + 0.5f}));
  }
}

TEST(StringModels, NormalizedSentencesWithManyRequestsInFlight) {
  Core core;
  auto compiled = core.compile_model(normalizer(), "CPU",
                                     {{props::performance_mode, "THROUGHPUT"},
                                      {props::num_streams, 2},
                                      {props::auto_batch_max_size, 8}});
  // Outputs sized by their data, elements that are objects: never merged into batches.
  EXPECT_EQ(compiled.get_property(props::auto_batch_max_size).as_int(), 1);
  constexpr int threads = 3, per_thread = 12, rounds = 4;
  std::atomic<int> failures{0};
  std::vector<std::thread> workers;
  for (int t = 0; t < threads; ++t)
    workers.emplace_back([&, t] {
      std::vector<InferRequest> requests;
      for (int i = 0; i < per_thread; ++i) requests.push_back(compiled.create_infer_request());
      for (int r = 0; r < rounds; ++r) {
        std::vector<std::vector<std::string>> inputs;
        for (int i = 0; i < per_thread; ++i) {
          inputs.push_back(sentence(t * 100 + r * 10 + i));
          requests[static_cast<size_t>(i)].set_tensor(
              "words", Tensor::from_vector<std::string>(
                           {1, static_cast<int64_t>(inputs.back().size())}, inputs.back()));
        }
        for (auto& request : requests) request.start_async();
        for (int i = 0; i < per_thread; ++i) {
          try {
            requests[static_cast<size_t>(i)].wait();
          } catch (const std::exception& e) {
            ++failures;
            continue;
          }
          const auto want = expected_kept(inputs[static_cast<size_t>(i)]);
          const Tensor kept = requests[static_cast<size_t>(i)].get_tensor("kept");
          EXPECT_EQ(kept.shape(), (Shape{1, static_cast<int64_t>(want.size())}));
          EXPECT_EQ(kept.to_vector<std::string>(), want);
        }
      }
    });
  for (auto& w : workers) w.join();
  EXPECT_EQ(failures.load(), 0);
}

TEST(StringModels, CaseChangesFollowUnicodeNotJustAscii) {
  Core core;
  auto lower = core.compile_model(normalizer("LOWER"), "CPU").create_infer_request();
  lower.set_tensor("words",
                   Tensor::from_vector<std::string>(
                       {1, 4}, {"ÄRGER", "ΩMEGA", "Straße", std::string("\xff\xfeOK", 4)}));
  lower.infer();
  // Bytes that are not UTF-8 pass unchanged; the letters after them are still mapped.
  EXPECT_EQ(lower.get_tensor("kept").to_vector<std::string>(),
            (std::vector<std::string>{"ärger", "ωmega", "straße", std::string("\xff\xfeok", 4)}));
  auto upper = core.compile_model(normalizer("UPPER"), "CPU").create_infer_request();
  upper.set_tensor("words", Tensor::from_vector<std::string>({1, 2}, {"the", "ärger"}));
  upper.infer();
  EXPECT_EQ(upper.get_tensor("kept").to_vector<std::string>(), std::vector<std::string>{"ÄRGER"});
}

TEST(StringModels, AnOpWithoutAStringKernelIsRefusedNamingTheNode) {
  ModelBuilder b("concat_text");
  auto x = b.input("text", ElementType::string, {2});
  b.output(b.op("Concat", {x, x}, {{"axis", int64_t{0}}}, "joined"), "y");
  try {
    Core().compile_model(b.build(), "CPU");
    ADD_FAILURE() << "a Concat of strings compiled";
  } catch (const UnsupportedOperation& e) {
    EXPECT_THAT(e.what(), HasSubstr("Concat node 'joined': input 'text' holds strings"));
  }
}

TEST(StringModels, ANumberGivenForATextInputIsATypedError) {
  Core core;
  auto request = core.compile_model(text_to_numbers(), "CPU").create_infer_request();
  EXPECT_THROW(request.set_tensor("text", Tensor::from_vector<float>({2}, {1.f, 2.f})),
               TensorMismatch);
  request.set_tensor("text", Tensor::from_vector<std::string>({1}, {"7"}));
  request.infer();
  EXPECT_EQ(request.get_tensor("y").to_vector<float>(), std::vector<float>{7.f});
}

TEST(StringModels, ShapeOnlyOpsMoveTextUnchanged) {
  ModelBuilder b("reshaped_text");
  auto x = b.input("text", ElementType::string, {2, 3});
  auto flat = b.op("Reshape", {x, b.constant("six", Tensor::from_vector<int64_t>({1}, {6}))});
  auto wide = b.op("Unsqueeze", {flat, b.constant("axes", Tensor::from_vector<int64_t>({1}, {0}))});
  auto back = b.op("Squeeze", {wide, b.constant("axis", Tensor::from_vector<int64_t>({1}, {0}))});
  auto rows = b.op("Flatten", {b.op("Identity", {back})}, {{"axis", int64_t{1}}});
  b.output(rows, "rows");
  Core core;
  auto request = core.compile_model(b.build(), "CPU").create_infer_request();
  const std::vector<std::string> text = {"a", std::string(64, 'b'), "", "d", "é", "f"};
  for (int round = 0; round < 3; ++round) {
    request.set_tensor("text", Tensor::from_vector<std::string>({2, 3}, text));
    request.infer();
    const Tensor rows_out = request.get_tensor("rows");
    EXPECT_EQ(rows_out.shape(), (Shape{6, 1}));
    EXPECT_EQ(rows_out.to_vector<std::string>(), text);
  }
}

TEST(StringModels, ConstantTextIsFoldedIntoNumbers) {
  // Cast of a constant string tensor runs once, when the model is compiled.
  ModelBuilder b("parsed_offsets");
  auto x = b.input("x", ElementType::f32, {2});
  auto offsets =
      b.op("Cast", {b.constant("offsets", Tensor::from_vector<std::string>({2}, {"1.5", "-2"}))},
           {{"to", onnx_float}});
  b.output(b.op("Add", {x, offsets}), "y");
  Core core;
  auto compiled = core.compile_model(b.build(), "CPU");
  auto request = compiled.create_infer_request();
  request.set_tensor("x", Tensor::from_vector<float>({2}, {1.f, 1.f}));
  request.infer();
  EXPECT_EQ(request.get_tensor("y").to_vector<float>(), (std::vector<float>{2.5f, -1.f}));
}
