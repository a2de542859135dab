// The `troupe` command line: subcommand dispatch.

#include <cstdlib>
#include <iostream>
#include <set>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "apps/bench_command.hpp"
#include "apps/compile_command.hpp"
#include "apps/info_command.hpp"
#include "apps/perf_command.hpp"
#include "apps/quantize_command.hpp"
#include "apps/run_command.hpp"
#include "apps/serve_command.hpp"
#include "troupe/version.hpp"

namespace {

void collect_long_names(CLI::App& app, std::set<std::string>& names) {
  for (const CLI::Option* opt : app.get_options())
    for (const auto& name : opt->get_lnames()) names.insert(name);
  for (CLI::App* sub : app.get_subcommands(std::function<bool(CLI::App*)>{}))
    collect_long_names(*sub, names);
}

bool is_command(CLI::App& app, const std::string& name) {
  for (CLI::App* sub : app.get_subcommands(std::function<bool(CLI::App*)>{}))
    if (sub->check_name(name)) return true;
  return false;
}

// benchmark_app-style single-dash long options (-nireq 4, -hint=latency, -pc) become their
// double-dash form, which is what CLI11 parses. Only names of real long options are rewritten, so
// short options (-t 5) and negative numbers pass through untouched.
std::vector<std::string> normalize_arguments(CLI::App& app, int argc, char** argv) {
  std::set<std::string> long_names;
  collect_long_names(app, long_names);
  std::vector<std::string> args(argv, argv + argc);
  for (size_t i = 1; i < args.size(); ++i) {
    std::string& a = args[i];
    if (a == "--") break;
    if (a.size() < 3 || a[0] != '-' || a[1] == '-') continue;
    const std::string name =
        a.substr(1, a.find('=') == std::string::npos ? std::string::npos : a.find('=') - 1);
    if (long_names.count(name)) a = "-" + a;
  }
  return args;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "troupe: a dataflow, actor-based inference engine. A compiled model is a pipeline of "
      "actors (scheduler -> preprocess -> upload -> execute streams -> download -> postprocess "
      "-> completion); many requests are in flight at once, each in its own stage.",
      "troupe"};
  app.set_version_flag("--version", std::string("troupe ") + troupe::library_version);
  app.require_subcommand(1);
  app.get_formatter()->column_width(28);
  app.footer(
      "Run `troupe <command> --help` for a command's options. Long options may also be written "
      "with one dash, as in OpenVINO's benchmark_app (-nireq 4 = --nireq 4).\n"
      "Example: troupe bench -hint throughput -nireq 4 -t 10 -report json bench.json");

  troupe::apps::BenchOptions bench;
  CLI::App* bench_cmd = troupe::apps::add_bench_command(app, bench);
  bench_cmd->footer(
      "Without -m, runs the embedded default CNN. Prints the configuration, the first "
      "inference's time, throughput (FPS), latency (median, average, min, max, p90, p99; "
      "start_async to callback), the per-stage counter table, mean requests in flight, stage "
      "overlap and the bottleneck stage.\n"
      "Long options may also be written with one dash: -hint, -nireq, -nstreams, -nthreads, "
      "-niter, -pc, -report.");
  troupe::apps::CompileOptions compile;
  CLI::App* compile_cmd = troupe::apps::add_compile_command(app, compile);
  troupe::apps::InfoOptions info;
  CLI::App* info_cmd = troupe::apps::add_info_command(app, info);
  troupe::apps::RunOptions run;
  CLI::App* run_cmd = troupe::apps::add_run_command(app, run);
  troupe::apps::ServeOptions serve;
  CLI::App* serve_cmd = troupe::apps::add_serve_command(app, serve);
  troupe::apps::PerfOptions perf;
  CLI::App* perf_cmd = troupe::apps::add_perf_command(app, perf);
  troupe::apps::QuantizeOptions quantize;
  CLI::App* quantize_cmd = troupe::apps::add_quantize_command(app, quantize);

  // CLI11 would only say "A subcommand is required" for a misspelt command.
  if (argc > 1 && argv[1][0] != '-' && !is_command(app, argv[1])) {
    std::cerr
        << "troupe: unknown command '" << argv[1]
        << "' (commands: bench, compile, info, perf, quantize, run, serve; see troupe --help)\n";
    return 2;
  }

  std::vector<std::string> args = normalize_arguments(app, argc, argv);
  std::vector<char*> c_args;
  for (auto& a : args) c_args.push_back(a.data());
  try {
    app.parse(static_cast<int>(c_args.size()), c_args.data());
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }

  if (bench_cmd->parsed()) return troupe::apps::run_bench(bench);
  if (compile_cmd->parsed()) return troupe::apps::run_compile(compile);
  if (info_cmd->parsed()) return troupe::apps::run_info(info);
  if (run_cmd->parsed()) return troupe::apps::run_run(run);
  if (serve_cmd->parsed()) return troupe::apps::run_serve(serve);
  if (perf_cmd->parsed()) return troupe::apps::run_perf(perf);
  if (quantize_cmd->parsed()) return troupe::apps::run_quantize(quantize);
  return 0;
}
