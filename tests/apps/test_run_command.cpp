// `troupe run`, run as a user runs it: .npy inputs in, .npy outputs out, and every mistake a user
// can make refused with a message naming it and a nonzero exit.

#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "serialization/npy_format.hpp"
#include "troupe/model_builder.hpp"
#include "troupe/serialize.hpp"

namespace troupe {
namespace {

using serialization::read_npy;
using serialization::write_npy;
using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;

namespace fs = std::filesystem;

struct RunResult {
  int exit_code = -1;
  std::string output;  // stdout and stderr together
};

class RunCommand : public ::testing::Test {
 protected:
  void SetUp() override {
    static std::atomic<int> counter{0};
    dir_ = fs::temp_directory_path() /
           ("troupe_run_" + std::to_string(::getpid()) + "_" + std::to_string(counter++));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override {
    std::error_code ignored;
    fs::remove_all(dir_, ignored);
  }

  std::string file(const std::string& name) const { return (dir_ / name).string(); }

  RunResult troupe(const std::string& args) const {
    const std::string out_file = file("stdout.txt");
    const std::string cmd =
        std::string(TROUPE_BINARY_DIR) + "/bin/troupe " + args + " > '" + out_file + "' 2>&1";
    const int status = std::system(cmd.c_str());
    RunResult r;
    r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    std::ifstream in(out_file);
    std::stringstream ss;
    ss << in.rdbuf();
    r.output = ss.str();
    return r;
  }

  // a f32 [?,4] (dynamic batch), b f32 [1,4]:  y = Relu(a + b),  "z/w" = a * b.
  std::string two_input_model() const {
    ModelBuilder mb("two_inputs");
    auto a = mb.input("a", ElementType::f32, {Shape::dynamic, 4});
    auto b = mb.input("b", ElementType::f32, {1, 4});
    mb.output(mb.op("Relu", {mb.op("Add", {a, b})}), "y");
    mb.output(mb.op("Mul", {a, b}), "z/w");
    const std::string path = file("two_inputs.troupe");
    save_model(mb.build(), path);
    return path;
  }

  // x f32 [1,3] -> Neg -> y.
  std::string one_input_model() const {
    ModelBuilder mb("one_input");
    auto x = mb.input("x", ElementType::f32, {1, 3});
    mb.output(mb.op("Neg", {x}), "y");
    const std::string path = file("one_input.troupe");
    save_model(mb.build(), path);
    return path;
  }

  // Writes the inputs of two_input_model: a with batch 2, b.
  std::string two_inputs_args() const {
    write_npy(Tensor::from_vector<float>({2, 4}, {1, -2, 3, -4, -1, 0, 0.5f, 2}), file("a.npy"));
    write_npy(Tensor::from_vector<float>({1, 4}, {1, 1, -1, 1}), file("b.npy"));
    return " --input a=" + file("a.npy") + " --input b=" + file("b.npy");
  }

  fs::path dir_;
};

TEST_F(RunCommand, WritesEveryOutputWithTheFilesBatch) {
  const std::string model = two_input_model();
  const std::string out = file("out");
  RunResult r = troupe("run -m " + model + two_inputs_args() + " --output-dir " + out);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("input  a: f32 [2,4] <- " + file("a.npy")));
  EXPECT_THAT(r.output, HasSubstr("output y: f32 [2,4] -> " + out + "/y.npy"));
  // '/' cannot be in a file name.
  EXPECT_THAT(r.output, HasSubstr("output z/w: f32 [2,4] -> " + out + "/z_w.npy"));

  Tensor y = read_npy(out + "/y.npy");
  EXPECT_EQ(y.shape(), Shape({2, 4}));
  EXPECT_THAT(y.to_vector<float>(), ElementsAre(2, 0, 2, 0, 0, 1, 0, 3));
  Tensor z = read_npy(out + "/z_w.npy");
  EXPECT_THAT(z.to_vector<float>(), ElementsAre(1, -2, -3, -4, -1, 0, -0.5f, 2));

  // Single-dash long options as elsewhere in the CLI; a batch of 1 from another file.
  write_npy(Tensor::from_vector<float>({1, 4}, {5, 5, 5, 5}), file("a1.npy"));
  r = troupe("run -m " + model + " -input a=" + file("a1.npy") + " -input b=" + file("b.npy") +
             " -output-dir " + out);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_THAT(read_npy(out + "/y.npy").to_vector<float>(), ElementsAre(6, 6, 4, 6));
}

TEST_F(RunCommand, RunsACompiledBlobLikeTheModel) {
  const std::string model = two_input_model();
  const std::string blob = file("two_inputs.blob");
  RunResult r = troupe("compile -m " + model + " -o " + blob);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  r = troupe("run -m " + blob + two_inputs_args() + " -o " + file("out"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_THAT(read_npy(file("out/y.npy")).to_vector<float>(), ElementsAre(2, 0, 2, 0, 0, 1, 0, 3));
}

TEST_F(RunCommand, BareFileForAOneInputModel) {
  const std::string model = one_input_model();
  write_npy(Tensor::from_vector<float>({1, 3}, {1, -2, 0}), file("x.npy"));
  RunResult r = troupe("run -m " + model + " --input " + file("x.npy") + " -o " + file("o"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_THAT(read_npy(file("o/y.npy")).to_vector<float>(), ElementsAre(-1, 2, 0));

  // Without NAME= a two-input model does not know which input is meant.
  const std::string two = two_input_model();
  r = troupe("run -m " + two + " --input " + file("x.npy") + " -o " + file("o"));
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_THAT(r.output, AllOf(HasSubstr("has no NAME= and the model has 2 inputs"),
                              HasSubstr("a f32 [?,4], b f32 [1,4]")));
}

TEST_F(RunCommand, UnknownInputListsTheModelsInputs) {
  const std::string model = two_input_model();
  write_npy(Tensor::from_vector<float>({1, 4}, {1, 2, 3, 4}), file("c.npy"));
  RunResult r = troupe("run -m " + model + two_inputs_args() + " --input c=" + file("c.npy") +
                       " -o " + file("o"));
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_THAT(r.output, AllOf(HasSubstr("troupe run: error: the model has no input 'c'"),
                              HasSubstr("its inputs: a f32 [?,4], b f32 [1,4]")));
  EXPECT_FALSE(fs::exists(file("o")));  // nothing ran, nothing written
}

TEST_F(RunCommand, MissingAndDuplicateInputs) {
  const std::string model = two_input_model();
  write_npy(Tensor::from_vector<float>({1, 4}, {1, 2, 3, 4}), file("a.npy"));
  RunResult r = troupe("run -m " + model + " --input a=" + file("a.npy") + " -o " + file("o"));
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_THAT(r.output, AllOf(HasSubstr("input 'b' (f32 [1,4]) is not given"),
                              HasSubstr("pass --input b=FILE.npy")));

  r = troupe("run -m " + model + " --input a=" + file("a.npy") + " --input a=" + file("a.npy") +
             " -o " + file("o"));
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_THAT(r.output, HasSubstr("input 'a' is given twice"));

  r = troupe("run -m " + model + " --input =" + file("a.npy") + " -o " + file("o"));
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_THAT(r.output, HasSubstr("no input name before '='"));
  r = troupe("run -m " + model + " --input a= -o " + file("o"));
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_THAT(r.output, HasSubstr("no file after '='"));
}

TEST_F(RunCommand, WrongElementTypeOrShape) {
  const std::string model = two_input_model();
  two_inputs_args();
  write_npy(Tensor::from_vector<double>({1, 4}, {1, 2, 3, 4}), file("b64.npy"));
  RunResult r = troupe("run -m " + model + " --input a=" + file("a.npy") +
                       " --input b=" + file("b64.npy") + " -o " + file("o"));
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_THAT(r.output,
              HasSubstr("input 'b' is f32 in the model but '" + file("b64.npy") + "' holds f64"));

  write_npy(Tensor::from_vector<float>({2, 5}, std::vector<float>(10, 1.f)), file("a25.npy"));
  r = troupe("run -m " + model + " --input a=" + file("a25.npy") + " --input b=" + file("b.npy") +
             " -o " + file("o"));
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_THAT(r.output, HasSubstr("input 'a' has shape [?,4] in the model but '" + file("a25.npy") +
                                  "' holds [2,5]"));

  // A static dimension cannot change either.
  write_npy(Tensor::from_vector<float>({2, 4}, std::vector<float>(8, 1.f)), file("b24.npy"));
  r = troupe("run -m " + model + " --input a=" + file("a.npy") + " --input b=" + file("b24.npy") +
             " -o " + file("o"));
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_THAT(r.output, HasSubstr("input 'b' has shape [1,4] in the model"));
}

TEST_F(RunCommand, BadOrMissingNpyFileIsNamed) {
  const std::string model = one_input_model();
  std::ofstream(file("bad.npy")) << "not numpy at all";
  RunResult r = troupe("run -m " + model + " --input x=" + file("bad.npy") + " -o " + file("o"));
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_THAT(r.output, AllOf(HasSubstr(file("bad.npy")), HasSubstr("not an .npy file")));

  r = troupe("run -m " + model + " --input x=" + file("none.npy") + " -o " + file("o"));
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_THAT(r.output, AllOf(HasSubstr(file("none.npy")), HasSubstr("cannot open")));
}

TEST_F(RunCommand, BadModelOutputDirectoryAndOptions) {
  const std::string model = one_input_model();
  write_npy(Tensor::from_vector<float>({1, 3}, {1, 2, 3}), file("x.npy"));

  RunResult r =
      troupe("run -m " + file("none.onnx") + " --input x=" + file("x.npy") + " -o " + file("o"));
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_THAT(r.output, HasSubstr(file("none.onnx")));

  std::ofstream(file("plain_file")) << "x";
  r = troupe("run -m " + model + " --input x=" + file("x.npy") + " -o " + file("plain_file"));
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_THAT(r.output, HasSubstr("cannot create the output directory '" + file("plain_file")));

  // CLI11 refuses these before anything runs.
  r = troupe("run -m " + model + " --input x=" + file("x.npy"));
  EXPECT_NE(r.exit_code, 0);
  EXPECT_THAT(r.output, HasSubstr("--output-dir is required"));
  r = troupe("run -m " + model + " --input x=" + file("x.npy") + " -o " + file("o") +
             " --infer_precision f8");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_THAT(r.output, HasSubstr("--infer_precision"));
  EXPECT_FALSE(fs::exists(file("o")));

  r = troupe("run --help");
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_THAT(r.output, AllOf(HasSubstr("NAME=FILE.npy"), HasSubstr("--output-dir")));
  r = troupe("runn");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.output, HasSubstr("commands: bench, compile, info, perf, quantize, run, serve"));
}

TEST_F(RunCommand, InferPrecisionIsAccepted) {
  const std::string model = one_input_model();
  write_npy(Tensor::from_vector<float>({1, 3}, {1, -2, 0.5f}), file("x.npy"));
  RunResult r = troupe("run -m " + model + " --input x=" + file("x.npy") + " -o " + file("o") +
                       " --infer_precision f32 -d CPU");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_THAT(r.output, Not(HasSubstr("error")));
  EXPECT_THAT(read_npy(file("o/y.npy")).to_vector<float>(), ElementsAre(-1, 2, -0.5f));
}

}  // namespace
}  // namespace troupe
