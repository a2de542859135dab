// Runs the ONNX backend node tests through troupe's public API and compares with the suite's
// reference outputs (rtol 1e-3, atol 1e-7, as the ONNX backend test runner does).
//
//   troupe_onnx_conformance DIR [--filter TEXT]... [--known-failures FILE] [--timeout SECONDS]
//                           [--verbose] [--no-isolate]
//
// DIR holds one directory per test case (model.onnx, test_data_set_0/{input,output}_N.pb), as
// written by scripts/generate_onnx_conformance.sh into DIR/node. Each case is classified:
//   passed       every output matches
//   failed       an output differs (type, shape or values)
//   unsupported  reading or compiling threw UnsupportedOperation (an op, type or attribute troupe
//                does not implement)
//   error        anything else went wrong (including a crash or a timeout)
// The suite feeds shapes, axes, pads, K, ... as graph inputs, while troupe infers every shape at
// compile time from constants. A case that cannot run as it is therefore runs a second time with
// its integer inputs (then all inputs) turned into initializers holding the case's data; passes of
// that kind are counted in the "frozen" column (and included in "pass").
//
// A case is "claimed" when troupe has a schema and a kernel for every op in its graph. The exit
// status is 1 when a claimed case fails or errs and is not listed in the known-failures file, 77
// when DIR does not exist (ctest: skipped), 0 otherwise.
//
// Cases run in a forked worker process so that a crashing or hanging kernel costs one case, not the
// whole run; the worker is restarted after the case that killed it.

#include <onnx/onnx_pb.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "engine/ops/op_schema.hpp"
#include "kernels/kernel_registry.hpp"
#include "serialization/onnx_reader.hpp"
#include "troupe/core.hpp"
#include "troupe/error.hpp"

namespace fs = std::filesystem;

namespace {

constexpr double rtol = 1e-3;
constexpr double atol = 1e-7;

enum class Status { passed, failed, unsupported, error };

const char* status_name(Status s) {
  switch (s) {
    case Status::passed:
      return "passed";
    case Status::failed:
      return "failed";
    case Status::unsupported:
      return "unsupported";
    case Status::error:
      return "error";
  }
  return "?";
}

struct Outcome {
  Status status = Status::error;
  std::string message;
  bool frozen = false;  // ran with some inputs bound as constants (see run_case_frozen)
};

struct Case {
  std::string name;
  fs::path dir;
  std::string op;                // the op the case is about, for the per-op summary
  std::vector<std::string> ops;  // distinct op types of its graph
  bool claimed = false;          // troupe has a schema and a kernel for all of them
  bool known_failure = false;
  Outcome outcome;
};

struct Options {
  fs::path dir;
  std::vector<std::string> filters;
  std::optional<fs::path> known_failures;
  int timeout_seconds = 120;
  bool verbose = false;
  bool isolate = true;
};

// ---- running one case (in the worker) -----------------------------------------------------------

std::string describe_value(const troupe::Tensor& t, int64_t i) {
  std::ostringstream s;
  s.precision(9);
  s << t.value_at(i);
  return s.str();
}

// Empty when `actual` matches `expected` within the tolerances, else what differs.
std::string compare(const std::string& name, const troupe::Tensor& actual,
                    const troupe::Tensor& expected) {
  if (actual.element_type() != expected.element_type())
    return "output '" + name + "' has element type " +
           std::string(troupe::to_string(actual.element_type())) + ", expected " +
           std::string(troupe::to_string(expected.element_type()));
  if (actual.shape() != expected.shape())
    return "output '" + name + "' has shape " + actual.shape().to_string() + ", expected " +
           expected.shape().to_string();
  if (expected.element_type() == troupe::ElementType::string) {  // strings match exactly
    const auto got = actual.to_vector<std::string>();
    const auto want = expected.to_vector<std::string>();
    for (size_t i = 0; i < want.size(); ++i)
      if (got[i] != want[i])
        return "output '" + name + "': string " + std::to_string(i) + " is '" + got[i] +
               "', expected '" + want[i] + "'";
    return {};
  }
  int64_t mismatches = 0;
  int64_t first = -1;
  double worst = 0;
  for (int64_t i = 0; i < expected.size(); ++i) {
    const double a = actual.value_at(i);
    const double e = expected.value_at(i);
    bool ok;
    if (std::isnan(e))
      ok = std::isnan(a);
    else if (std::isinf(e))
      ok = a == e;
    else
      ok = std::abs(a - e) <= atol + rtol * std::abs(e);
    if (!ok) {
      if (first < 0) first = i;
      ++mismatches;
      if (!std::isnan(a) && std::isfinite(e)) worst = std::max(worst, std::abs(a - e));
    }
  }
  if (mismatches == 0) return {};
  std::ostringstream s;
  s << "output '" << name << "': " << mismatches << " of " << expected.size()
    << " values differ; first at flat index " << first << ": got " << describe_value(actual, first)
    << ", expected " << describe_value(expected, first) << "; largest difference " << worst;
  return s.str();
}

std::vector<fs::path> data_files(const fs::path& set_dir, const std::string& prefix) {
  std::vector<fs::path> files;
  for (int i = 0;; ++i) {
    fs::path p = set_dir / (prefix + "_" + std::to_string(i) + ".pb");
    if (!fs::exists(p)) break;
    files.push_back(p);
  }
  return files;
}

// Reads a test data file. numpy has no bfloat16, so the suite stores bf16 data as UINT16 bits;
// those are read as bf16 when the model expects bf16 there.
troupe::Tensor load_tensor(const fs::path& path, troupe::ElementType expected) {
  if (expected == troupe::ElementType::bf16) {
    onnx::TensorProto proto;
    std::ifstream in(path, std::ios::binary);
    if (in && proto.ParseFromIstream(&in) && proto.data_type() == onnx::TensorProto::UINT16) {
      proto.set_data_type(onnx::TensorProto::BFLOAT16);
      const std::string bytes = proto.SerializeAsString();
      return troupe::serialization::read_onnx_tensor_from_buffer(bytes.data(), bytes.size(),
                                                                 path.string());
    }
  }
  return troupe::serialization::read_onnx_tensor(path.string());
}

// Runs a model on the case's data. `bound` lists the input files still fed as inputs, in the
// order of the model's inputs (the others were frozen into the model).
Outcome run_model(troupe::Core& core, const std::shared_ptr<troupe::Model>& model,
                  const std::vector<fs::path>& bound, const std::vector<fs::path>& output_files) {
  troupe::CompiledModel compiled;
  try {
    compiled = core.compile_model(model, "CPU");
  } catch (const troupe::UnsupportedOperation& e) {
    return {Status::unsupported, std::string("compile: ") + e.what()};
  } catch (const std::exception& e) {
    return {Status::error, std::string("compile: ") + e.what()};
  }
  const auto& model_inputs = compiled.inputs();
  const auto& model_outputs = compiled.outputs();
  if (bound.size() != model_inputs.size())
    return {Status::error, "the case has " + std::to_string(bound.size()) +
                               " input files, the compiled model " +
                               std::to_string(model_inputs.size()) + " inputs"};
  if (output_files.size() != model_outputs.size())
    return {Status::error, "the case has " + std::to_string(output_files.size()) +
                               " output files, the compiled model " +
                               std::to_string(model_outputs.size()) + " outputs"};
  try {
    troupe::InferRequest request = compiled.create_infer_request();
    for (size_t i = 0; i < bound.size(); ++i)
      request.set_input_tensor(i, load_tensor(bound[i], model_inputs[i].type));
    request.infer();
    std::string problems;
    for (size_t i = 0; i < output_files.size(); ++i) {
      troupe::Tensor expected = load_tensor(output_files[i], model_outputs[i].type);
      std::string diff = compare(model_outputs[i].name, request.get_output_tensor(i), expected);
      if (!diff.empty()) problems += (problems.empty() ? "" : "; ") + diff;
    }
    if (!problems.empty()) return {Status::failed, problems};
  } catch (const troupe::UnsupportedOperation& e) {
    return {Status::unsupported, std::string("infer: ") + e.what()};
  } catch (const std::exception& e) {
    return {Status::error, std::string("infer: ") + e.what()};
  }
  return {Status::passed, {}};
}

Outcome read_error(const std::exception& e) {
  if (dynamic_cast<const troupe::UnsupportedOperation*>(&e))
    return {Status::unsupported, std::string("read: ") + e.what()};
  return {Status::error, std::string("read: ") + e.what()};
}

Outcome run_case(troupe::Core& core, const Case& c) {
  const fs::path set_dir = c.dir / "test_data_set_0";
  std::shared_ptr<troupe::Model> model;
  try {
    model = troupe::serialization::read_onnx_model((c.dir / "model.onnx").string());
  } catch (const std::exception& e) {
    return read_error(e);
  }
  return run_model(core, model, data_files(set_dir, "input"), data_files(set_dir, "output"));
}

bool is_floating_onnx_type(int32_t t) {
  return t == onnx::TensorProto::FLOAT || t == onnx::TensorProto::DOUBLE ||
         t == onnx::TensorProto::FLOAT16 || t == onnx::TensorProto::BFLOAT16;
}

enum class Freeze { integer_inputs, all_inputs };

// The suite feeds shapes, axes, pads, repeats, K, ... as graph inputs, and troupe needs those as
// constants (it infers every shape at compile time). To still check these ops' semantics, a case
// that cannot run as it is runs again with such inputs turned into initializers holding the case's
// data: first the integer and bool inputs, then all inputs. Returns nothing when `mode` freezes
// nothing (or nothing more than integer_inputs did).
std::optional<Outcome> run_case_frozen(troupe::Core& core, const Case& c, Freeze mode) {
  const fs::path set_dir = c.dir / "test_data_set_0";
  const auto input_files = data_files(set_dir, "input");
  onnx::ModelProto proto;
  {
    std::ifstream in(c.dir / "model.onnx", std::ios::binary);
    if (!in || !proto.ParseFromIstream(&in)) return std::nullopt;
  }
  auto* graph = proto.mutable_graph();
  if (static_cast<size_t>(graph->input_size()) != input_files.size()) return std::nullopt;
  std::vector<fs::path> bound;
  google::protobuf::RepeatedPtrField<onnx::ValueInfoProto> kept;
  size_t integer_count = 0, frozen = 0;
  for (int j = 0; j < graph->input_size(); ++j) {
    const auto& input = graph->input(j);
    const bool integer = !is_floating_onnx_type(input.type().tensor_type().elem_type());
    integer_count += integer;
    if (mode == Freeze::all_inputs || integer) {
      onnx::TensorProto value;
      std::ifstream in(input_files[j], std::ios::binary);
      if (!in || !value.ParseFromIstream(&in)) return std::nullopt;
      value.set_name(input.name());
      *graph->add_initializer() = value;
      ++frozen;
    } else {
      *kept.Add() = input;
      bound.push_back(input_files[j]);
    }
  }
  if (frozen == 0 || (mode == Freeze::all_inputs && frozen == integer_count)) return std::nullopt;
  graph->mutable_input()->Swap(&kept);
  const std::string bytes = proto.SerializeAsString();
  std::shared_ptr<troupe::Model> model;
  try {
    model = troupe::serialization::read_onnx_model_from_buffer(bytes.data(), bytes.size(),
                                                               c.dir.string());
  } catch (const std::exception& e) {
    return read_error(e);
  }
  Outcome o = run_model(core, model, bound, data_files(set_dir, "output"));
  o.frozen = true;
  return o;
}

// A case as it is, then (if it could not run) with its shape-like inputs frozen.
Outcome run_case_with_fallback(troupe::Core& core, const Case& c) {
  Outcome o = run_case(core, c);
  if (o.status != Status::error && o.status != Status::unsupported) return o;
  for (Freeze mode : {Freeze::integer_inputs, Freeze::all_inputs}) {
    auto retry = run_case_frozen(core, c, mode);
    if (retry && (retry->status == Status::passed || retry->status == Status::failed)) {
      retry->message = "(inputs frozen to constants) " + retry->message;
      return *retry;
    }
  }
  return o;
}

// ---- the worker protocol -----------------------------------------------------------------------
// The worker writes "B <index>" when it begins a case and "E <index> <status> <frozen> <message>"
// when it ends it (one line each, the message's newlines replaced), so the parent knows which case
// a crash or a hang belongs to.

std::string one_line(std::string s) {
  std::replace(s.begin(), s.end(), '\n', ' ');
  std::replace(s.begin(), s.end(), '\r', ' ');
  return s;
}

void write_all(int fd, const std::string& text) {
  const char* p = text.data();
  size_t left = text.size();
  while (left > 0) {
    ssize_t n = ::write(fd, p, left);
    if (n < 0) {
      if (errno == EINTR) continue;
      _exit(3);
    }
    p += n;
    left -= static_cast<size_t>(n);
  }
}

[[noreturn]] void worker_main(int fd, std::vector<Case>& cases, size_t first) {
  troupe::Core core;
  for (size_t i = first; i < cases.size(); ++i) {
    write_all(fd, "B " + std::to_string(i) + "\n");
    Outcome o = run_case_with_fallback(core, cases[i]);
    write_all(fd, "E " + std::to_string(i) + " " + std::to_string(static_cast<int>(o.status)) +
                      " " + (o.frozen ? "1" : "0") + " " + one_line(o.message) + "\n");
  }
  // Skip destructors: the parent only needs the pipe, and a kernel bug must not hang the exit.
  _exit(0);
}

std::string describe_exit(int wstatus) {
  if (WIFSIGNALED(wstatus)) {
    int sig = WTERMSIG(wstatus);
    return std::string("crashed with signal ") + std::to_string(sig) + " (" + strsignal(sig) + ")";
  }
  if (WIFEXITED(wstatus))
    return "worker exited with status " + std::to_string(WEXITSTATUS(wstatus));
  return "worker ended";
}

void run_isolated(std::vector<Case>& cases, const Options& options) {
  size_t next = 0;
  while (next < cases.size()) {
    int fds[2];
    if (pipe(fds) != 0) {
      perror("pipe");
      std::exit(2);
    }
    std::cout.flush();
    std::cerr.flush();
    pid_t pid = fork();
    if (pid < 0) {
      perror("fork");
      std::exit(2);
    }
    if (pid == 0) {
      close(fds[0]);
      worker_main(fds[1], cases, next);
    }
    close(fds[1]);
    std::string buffer;
    long current = -1;  // the case the worker is running
    auto deadline =
        std::chrono::steady_clock::now() + std::chrono::seconds(options.timeout_seconds);
    bool worker_gone = false;
    std::string lost_reason;
    while (!worker_gone) {
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                      deadline - std::chrono::steady_clock::now())
                      .count();
      pollfd pfd{fds[0], POLLIN, 0};
      int ready = left > 0 ? poll(&pfd, 1, static_cast<int>(left)) : 0;
      if (ready < 0 && errno == EINTR) continue;
      if (ready == 0) {  // the current case hangs
        kill(pid, SIGKILL);
        lost_reason = "timed out after " + std::to_string(options.timeout_seconds) + " s";
        break;
      }
      char chunk[4096];
      ssize_t n = read(fds[0], chunk, sizeof chunk);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        worker_gone = true;
        break;
      }
      buffer.append(chunk, static_cast<size_t>(n));
      size_t eol;
      while ((eol = buffer.find('\n')) != std::string::npos) {
        std::string line = buffer.substr(0, eol);
        buffer.erase(0, eol + 1);
        std::istringstream in(line);
        char kind = 0;
        size_t index = 0;
        in >> kind >> index;
        if (kind == 'B') {
          current = static_cast<long>(index);
          deadline =
              std::chrono::steady_clock::now() + std::chrono::seconds(options.timeout_seconds);
        } else if (kind == 'E') {
          int status = 0, frozen = 0;
          in >> status >> frozen;
          std::string message;
          std::getline(in, message);
          if (!message.empty() && message[0] == ' ') message.erase(0, 1);
          cases[index].outcome = {static_cast<Status>(status), message, frozen != 0};
          current = -1;
          next = index + 1;
          if (options.verbose)
            std::cout << status_name(cases[index].outcome.status) << "  " << cases[index].name
                      << (message.empty() ? "" : "  " + message) << std::endl;
        }
      }
    }
    close(fds[0]);
    int wstatus = 0;
    waitpid(pid, &wstatus, 0);
    if (lost_reason.empty()) lost_reason = describe_exit(wstatus);
    if (current >= 0) {
      cases[current].outcome = {Status::error, lost_reason};
      if (options.verbose)
        std::cout << "error  " << cases[current].name << "  " << lost_reason << std::endl;
      next = static_cast<size_t>(current) + 1;
    } else if (next < cases.size()) {
      // The worker died or hung between cases (e.g. constructing the Core): nothing more can run.
      for (size_t i = next; i < cases.size(); ++i)
        cases[i].outcome = {Status::error, "the worker failed before the case: " + lost_reason};
      next = cases.size();
    }
  }
}

void run_in_process(std::vector<Case>& cases, const Options& options) {
  troupe::Core core;
  for (auto& c : cases) {
    if (options.verbose) std::cout << "...    " << c.name << std::endl;
    c.outcome = run_case_with_fallback(core, c);
    if (options.verbose)
      std::cout << status_name(c.outcome.status) << "  " << c.name
                << (c.outcome.message.empty() ? "" : "  " + c.outcome.message) << std::endl;
  }
}

// ---- collecting the cases ----------------------------------------------------------------------

std::vector<std::string> graph_ops(const fs::path& model_path) {
  std::ifstream in(model_path, std::ios::binary);
  onnx::ModelProto proto;
  std::vector<std::string> ops;
  if (!in || !proto.ParseFromIstream(&in)) return ops;
  for (const auto& node : proto.graph().node()) {
    // The op type the reader gives the node ("<domain>::<op_type>" outside the default domain).
    const std::string op = troupe::qualified_op_type(node.domain(), node.op_type());
    if (std::find(ops.begin(), ops.end(), op) == ops.end()) ops.push_back(op);
  }
  return ops;
}

bool is_claimed(const std::vector<std::string>& ops) {
  if (ops.empty()) return false;
  const auto& schemas = troupe::OpSchemaRegistry::instance();
  const auto& kernels = troupe::kernels::KernelRegistry::instance();
  for (const auto& op : ops) {
    if (op == "Constant") continue;  // the reader turns it into a constant
    if (!schemas.find(op) || !kernels.has_op(op)) return false;
  }
  return true;
}

std::set<std::string> read_known_failures(const fs::path& path) {
  std::set<std::string> names;
  std::ifstream in(path);
  if (!in) {
    std::cerr << "cannot read known-failures file " << path << "\n";
    std::exit(2);
  }
  std::string line;
  while (std::getline(in, line)) {
    auto hash = line.find('#');
    if (hash != std::string::npos) line.erase(hash);
    std::istringstream words(line);
    std::string name;
    if (words >> name) names.insert(name);
  }
  return names;
}

std::vector<Case> collect_cases(const Options& options) {
  std::vector<Case> cases;
  for (const auto& entry : fs::directory_iterator(options.dir)) {
    if (!entry.is_directory() || !fs::exists(entry.path() / "model.onnx")) continue;
    const std::string name = entry.path().filename().string();
    if (!options.filters.empty() &&
        std::none_of(options.filters.begin(), options.filters.end(),
                     [&](const std::string& f) { return name.find(f) != std::string::npos; }))
      continue;
    Case c;
    c.name = name;
    c.dir = entry.path();
    c.ops = graph_ops(c.dir / "model.onnx");
    c.claimed = is_claimed(c.ops);
    cases.push_back(std::move(c));
  }
  std::sort(cases.begin(), cases.end(),
            [](const Case& a, const Case& b) { return a.name < b.name; });
  // The op a case is about: its only op, or for an "_expanded" case (the function body of an op
  // written out as primitive ops) the op of its unexpanded twin.
  const std::string suffix = "_expanded";
  for (auto& c : cases) {
    std::vector<std::string> ops = c.ops;
    bool expanded = false;
    if (c.name.size() > suffix.size() &&
        c.name.compare(c.name.size() - suffix.size(), suffix.size(), suffix) == 0) {
      fs::path twin = options.dir / c.name.substr(0, c.name.size() - suffix.size()) / "model.onnx";
      auto twin_ops = graph_ops(twin);
      if (twin_ops.size() == 1) {
        ops = twin_ops;
        expanded = true;
      }
    }
    std::string op;
    for (const auto& o : ops)
      if (o != "Constant" || ops.size() == 1) op += (op.empty() ? "" : "+") + o;
    c.op = (op.empty() ? "(empty graph)" : op) + (expanded ? " (expanded)" : "");
  }
  return cases;
}

void usage() {
  std::cerr << "usage: troupe_onnx_conformance DIR [--filter TEXT]... [--known-failures FILE]\n"
               "                               [--timeout SECONDS] [--verbose] [--no-isolate]\n";
}

Options parse_options(int argc, char** argv) {
  Options options;
  std::vector<std::string> args(argv + 1, argv + argc);
  for (size_t i = 0; i < args.size(); ++i) {
    auto value = [&]() -> std::string {
      if (i + 1 >= args.size()) {
        usage();
        std::exit(2);
      }
      return args[++i];
    };
    if (args[i] == "--filter") {
      options.filters.push_back(value());
    } else if (args[i] == "--known-failures") {
      options.known_failures = value();
    } else if (args[i] == "--timeout") {
      options.timeout_seconds = std::max(1, std::stoi(value()));
    } else if (args[i] == "--verbose" || args[i] == "-v") {
      options.verbose = true;
    } else if (args[i] == "--no-isolate") {
      options.isolate = false;
    } else if (args[i] == "--help" || args[i] == "-h") {
      usage();
      std::exit(0);
    } else if (!args[i].empty() && args[i][0] == '-') {
      usage();
      std::exit(2);
    } else if (options.dir.empty()) {
      options.dir = args[i];
    } else {
      usage();
      std::exit(2);
    }
  }
  if (options.dir.empty()) {
    usage();
    std::exit(2);
  }
  return options;
}

struct Tally {
  int cases = 0, passed = 0, frozen = 0, failed = 0, unsupported = 0, error = 0;
  void add(const Outcome& o) {
    ++cases;
    if (o.status == Status::passed && o.frozen) ++frozen;
    switch (o.status) {
      case Status::passed:
        ++passed;
        break;
      case Status::failed:
        ++failed;
        break;
      case Status::unsupported:
        ++unsupported;
        break;
      case Status::error:
        ++error;
        break;
    }
  }
};

void print_row(const std::string& label, const Tally& t) {
  std::printf("%-44s %5d %5d %6d %5d %6d %5d\n", label.c_str(), t.cases, t.passed, t.frozen,
              t.failed, t.unsupported, t.error);
}

}  // namespace

int main(int argc, char** argv) {
  Options options = parse_options(argc, argv);
  if (!fs::is_directory(options.dir)) {
    std::cerr << "troupe_onnx_conformance: " << options.dir
              << " does not exist; generate it with scripts/generate_onnx_conformance.sh\n";
    return 77;
  }
  std::set<std::string> known;
  if (options.known_failures) known = read_known_failures(*options.known_failures);

  std::vector<Case> cases = collect_cases(options);
  for (auto& c : cases) c.known_failure = known.count(c.name) != 0;
  if (cases.empty()) {
    std::cerr << "troupe_onnx_conformance: no test cases in " << options.dir << "\n";
    return 2;
  }
  std::printf("running %zu ONNX node tests from %s\n", cases.size(), options.dir.c_str());
  std::fflush(stdout);
  if (options.isolate)
    run_isolated(cases, options);
  else
    run_in_process(cases, options);

  std::map<std::string, Tally> by_op;
  Tally total, claimed;
  std::vector<const Case*> regressions, fixed;
  for (const auto& c : cases) {
    by_op[c.op].add(c.outcome);
    total.add(c.outcome);
    if (c.claimed) claimed.add(c.outcome);
    const bool bad = c.outcome.status == Status::failed || c.outcome.status == Status::error;
    if (c.claimed && bad && !c.known_failure) regressions.push_back(&c);
    if (c.known_failure && c.outcome.status == Status::passed) fixed.push_back(&c);
  }

  std::printf("\n%-44s %5s %5s %6s %5s %6s %5s\n", "op", "cases", "pass", "frozen", "fail", "unsup",
              "error");
  for (const auto& [op, tally] : by_op) print_row(op, tally);
  std::printf("\n");
  print_row("total", total);
  print_row("claimed (schema and kernel for every op)", claimed);

  if (!options.verbose) {
    // Why claimed cases fail, known failures included (--verbose shows every case).
    bool header = false;
    for (const auto& c : cases) {
      if (!c.claimed || (c.outcome.status != Status::failed && c.outcome.status != Status::error))
        continue;
      if (!header) std::printf("\nclaimed cases that fail:\n");
      header = true;
      std::printf("  %-6s %s%s: %s\n", status_name(c.outcome.status), c.name.c_str(),
                  c.known_failure ? " (known)" : "", c.outcome.message.c_str());
    }
  }
  for (const Case* c : fixed)
    std::printf("note: %s passes now; remove it from the known failures\n", c->name.c_str());
  std::printf(
      "\n%d of %d cases passed (%d of them with inputs frozen to constants), %d failed, "
      "%d unsupported, %d errors; %d of %d claimed cases passed\n",
      total.passed, total.cases, total.frozen, total.failed, total.unsupported, total.error,
      claimed.passed, claimed.cases);
  if (!regressions.empty()) {
    std::printf("FAIL: %zu claimed case(s) failed or erred:", regressions.size());
    for (const Case* c : regressions) std::printf(" %s", c->name.c_str());
    std::printf("\n");
    return 1;
  }
  return 0;
}
