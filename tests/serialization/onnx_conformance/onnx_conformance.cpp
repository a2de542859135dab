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
};

struct Case {
  std::string name;
  fs::path dir;
  std::string op;                  // the op the case is about, for the per-op summary
  std::vector<std::string> ops;    // distinct op types of its graph
  bool claimed = false;            // troupe has a schema and a kernel for all of them
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

Outcome run_case(troupe::Core& core, const Case& c) {
  std::shared_ptr<troupe::Model> model;
  try {
    model = troupe::serialization::read_onnx_model((c.dir / "model.onnx").string());
  } catch (const troupe::UnsupportedOperation& e) {
    return {Status::unsupported, std::string("read: ") + e.what()};
  } catch (const std::exception& e) {
    return {Status::error, std::string("read: ") + e.what()};
  }
  troupe::CompiledModel compiled;
  try {
    compiled = core.compile_model(model, "CPU");
  } catch (const troupe::UnsupportedOperation& e) {
    return {Status::unsupported, std::string("compile: ") + e.what()};
  } catch (const std::exception& e) {
    return {Status::error, std::string("compile: ") + e.what()};
  }

  const fs::path set_dir = c.dir / "test_data_set_0";
  const auto input_files = data_files(set_dir, "input");
  const auto output_files = data_files(set_dir, "output");
  const auto& model_inputs = compiled.inputs();
  const auto& model_outputs = compiled.outputs();
  if (input_files.size() != model_inputs.size())
    return {Status::error, "the case has " + std::to_string(input_files.size()) +
                               " input files, the compiled model " +
                               std::to_string(model_inputs.size()) + " inputs"};
  if (output_files.size() != model_outputs.size())
    return {Status::error, "the case has " + std::to_string(output_files.size()) +
                               " output files, the compiled model " +
                               std::to_string(model_outputs.size()) + " outputs"};
  std::vector<troupe::Tensor> expected;
  try {
    troupe::InferRequest request = compiled.create_infer_request();
    for (size_t i = 0; i < input_files.size(); ++i)
      request.set_input_tensor(i, troupe::serialization::read_onnx_tensor(input_files[i].string()));
    for (const auto& f : output_files) expected.push_back(troupe::serialization::read_onnx_tensor(f.string()));
    request.infer();
    std::string problems;
    for (size_t i = 0; i < expected.size(); ++i) {
      std::string diff = compare(model_outputs[i].name, request.get_output_tensor(i), expected[i]);
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

// ---- the worker protocol -------------------------------------------------------------------------
// The worker writes "B <index>\n" when it begins a case and "E <index> <status> <message>\n" when it
// ends it (the message with newlines replaced), so the parent knows which case a crash belongs to.

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
    Outcome o = run_case(core, cases[i]);
    write_all(fd, "E " + std::to_string(i) + " " + std::to_string(static_cast<int>(o.status)) +
                      " " + one_line(o.message) + "\n");
  }
  // Skip destructors: the parent only needs the pipe, and a kernel bug must not hang the exit.
  _exit(0);
}

std::string describe_exit(int wstatus) {
  if (WIFSIGNALED(wstatus)) {
    int sig = WTERMSIG(wstatus);
    return std::string("crashed with signal ") + std::to_string(sig) + " (" + strsignal(sig) + ")";
  }
  if (WIFEXITED(wstatus)) return "worker exited with status " + std::to_string(WEXITSTATUS(wstatus));
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
    std::optional<size_t> current;  // the case the worker is running
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(options.timeout_seconds);
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
          current = index;
          deadline = std::chrono::steady_clock::now() + std::chrono::seconds(options.timeout_seconds);
        } else if (kind == 'E') {
          int status = 0;
          in >> status;
          std::string message;
          std::getline(in, message);
          if (!message.empty() && message[0] == ' ') message.erase(0, 1);
          cases[index].outcome = {static_cast<Status>(status), message};
          current.reset();
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
    if (current) {
      if (lost_reason.empty()) lost_reason = describe_exit(wstatus);
      cases[*current].outcome = {Status::error, lost_reason};
      if (options.verbose)
        std::cout << "error  " << cases[*current].name << "  " << lost_reason << std::endl;
      next = *current + 1;
    } else if (next < cases.size() && worker_gone && lost_reason.empty()) {
      // The worker died between cases (e.g. constructing the Core): nothing more can run.
      for (size_t i = next; i < cases.size(); ++i)
        cases[i].outcome = {Status::error, "the worker died before the case: " +
                                               describe_exit(wstatus)};
      next = cases.size();
    }
  }
}

void run_in_process(std::vector<Case>& cases, const Options& options) {
  troupe::Core core;
  for (auto& c : cases) {
    if (options.verbose) std::cout << "...    " << c.name << std::endl;
    c.outcome = run_case(core, c);
    if (options.verbose)
      std::cout << status_name(c.outcome.status) << "  " << c.name
                << (c.outcome.message.empty() ? "" : "  " + c.outcome.message) << std::endl;
  }
}

// ---- collecting the cases ---------------------------------------------------------------------------

std::vector<std::string> graph_ops(const fs::path& model_path) {
  std::ifstream in(model_path, std::ios::binary);
  onnx::ModelProto proto;
  std::vector<std::string> ops;
  if (!in || !proto.ParseFromIstream(&in)) return ops;
  for (const auto& node : proto.graph().node()) {
    std::string op = node.op_type();
    if (!node.domain().empty() && node.domain() != "ai.onnx") op = node.domain() + "." + op;
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
  int cases = 0, passed = 0, failed = 0, unsupported = 0, error = 0;
  void add(Status s) {
    ++cases;
    switch (s) {
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
  std::printf("%-44s %5d %5d %5d %6d %5d\n", label.c_str(), t.cases, t.passed, t.failed,
              t.unsupported, t.error);
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
    by_op[c.op].add(c.outcome.status);
    total.add(c.outcome.status);
    if (c.claimed) claimed.add(c.outcome.status);
    const bool bad = c.outcome.status == Status::failed || c.outcome.status == Status::error;
    if (c.claimed && bad && !c.known_failure) regressions.push_back(&c);
    if (c.known_failure && c.outcome.status == Status::passed) fixed.push_back(&c);
  }

  std::printf("\n%-44s %5s %5s %5s %6s %5s\n", "op", "cases", "pass", "fail", "unsup", "error");
  for (const auto& [op, tally] : by_op) print_row(op, tally);
  std::printf("\n");
  print_row("total", total);
  print_row("claimed (schema and kernel for every op)", claimed);

  if (!options.verbose) {
    // Why the remaining cases of claimed ops do not pass, known failures included.
    bool header = false;
    for (const auto& c : cases) {
      if (!c.claimed || c.outcome.status == Status::passed) continue;
      if (!header) std::printf("\nclaimed cases that do not pass:\n");
      header = true;
      std::printf("  %-11s %s%s: %s\n", status_name(c.outcome.status), c.name.c_str(),
                  c.known_failure ? " (known)" : "", c.outcome.message.c_str());
    }
  }
  for (const Case* c : fixed)
    std::printf("note: %s passes now; remove it from the known failures\n", c->name.c_str());
  std::printf("\n%d of %d cases passed (%d failed, %d unsupported, %d errors); %d of %d claimed "
              "cases passed\n",
              total.passed, total.cases, total.failed, total.unsupported, total.error,
              claimed.passed, claimed.cases);
  if (!regressions.empty()) {
    std::printf("FAIL: %zu claimed case(s) failed or erred:", regressions.size());
    for (const Case* c : regressions) std::printf(" %s", c->name.c_str());
    std::printf("\n");
    return 1;
  }
  return 0;
}
