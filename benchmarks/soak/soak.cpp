// Soak: a bounded number of requests (default 1 M) through one compiled model from several
// threads, with the traffic a long-running service sees: synchronous and asynchronous requests,
// callbacks that throw, cancels, per-request queue timeouts and wrong-shaped inputs. Samples the
// process's resident memory and the completed requests every second into a CSV, then checks:
//   - every request completed exactly once (each callback ran once, each sync call returned);
//   - every successful output equals the output of the same input run alone;
//   - nothing failed except as the traffic asked (Cancelled, RequestTimeout, TensorMismatch);
//   - RSS is flat after warm-up: growth over the last 80% of the run below --max-growth (5%).
// Exit status 0 only if all hold. benchmarks/soak.sh runs it and plots the CSV.
//
// Usage: troupe_soak [--model M.onnx] [--requests N] [--seconds S] [--threads T] [--csv FILE]
//                    [--max-growth FRACTION]
// Without --model it builds a two-layer MLP on [?, 64] (small, so the pipeline, not the kernels,
// is what runs a million times).

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <memory>
#include <mutex>
#include <random>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "apps/process_memory.hpp"
#include "troupe/core.hpp"
#include "troupe/error.hpp"
#include "troupe/model_builder.hpp"
#include "troupe/properties.hpp"

using namespace troupe;
using Clock = std::chrono::steady_clock;

namespace {

struct Options {
  std::string model;
  int64_t requests = 1'000'000;
  double seconds = 900;
  int threads = 4;
  std::string csv = "soak.csv";
  double max_growth = 0.05;
};

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) throw std::invalid_argument(a + " needs a value");
      return argv[++i];
    };
    if (a == "--model")
      o.model = value();
    else if (a == "--requests")
      o.requests = std::stoll(value());
    else if (a == "--seconds")
      o.seconds = std::stod(value());
    else if (a == "--threads")
      o.threads = std::stoi(value());
    else if (a == "--csv")
      o.csv = value();
    else if (a == "--max-growth")
      o.max_growth = std::stod(value());
    else
      throw std::invalid_argument("unknown argument '" + a + "'");
  }
  if (o.requests <= 0 || o.seconds <= 0 || o.threads <= 0)
    throw std::invalid_argument("--requests, --seconds and --threads must be positive");
  return o;
}

std::shared_ptr<Model> make_mlp() {
  ModelBuilder b("soak_mlp");
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> dist(-0.2f, 0.2f);
  auto weights = [&](std::vector<int64_t> dims) {
    Tensor t(ElementType::f32, Shape(dims));
    auto* p = static_cast<float*>(t.raw_data());
    for (int64_t i = 0; i < t.size(); ++i) p[i] = dist(rng);
    return t;
  };
  auto x = b.input("x", ElementType::f32, {Shape::dynamic, 64});
  auto h = b.op("Relu", {b.op("Add", {b.op("MatMul", {x, b.constant("w1", weights({64, 64}))}),
                                      b.constant("b1", weights({64}))})});
  b.output(b.op("MatMul", {h, b.constant("w2", weights({64, 10}))}), "y");
  return b.build();
}

// A fixed set of inputs and, for each, its outputs when run alone: successful outputs under load
// must match them.
struct Case {
  std::vector<std::pair<std::string, Tensor>> inputs;
  std::vector<std::pair<std::string, Tensor>> outputs;
};

std::vector<Case> make_cases(CompiledModel& compiled, int count) {
  std::vector<Case> cases;
  InferRequest request = compiled.create_infer_request();
  for (int c = 0; c < count; ++c) {
    std::mt19937 rng(static_cast<unsigned>(100 + c));
    std::uniform_real_distribution<float> dist(-1.f, 1.f);
    Case k;
    for (const ValueInfo& in : compiled.inputs()) {
      std::vector<int64_t> dims;
      for (int64_t d : in.shape.dims()) dims.push_back(d == Shape::dynamic ? 1 : d);
      Tensor t(ElementType::f32, Shape(dims));
      auto* p = static_cast<float*>(t.raw_data());
      for (int64_t i = 0; i < t.size(); ++i) p[i] = dist(rng);
      k.inputs.emplace_back(in.name, t);
      request.set_tensor(in.name, t);
    }
    request.infer();
    for (const ValueInfo& out : compiled.outputs())
      k.outputs.emplace_back(out.name, request.get_tensor(out.name).clone());
    cases.push_back(std::move(k));
  }
  return cases;
}

bool outputs_match(const InferRequest& request, const Case& k) {
  for (const auto& [name, expected] : k.outputs) {
    const Tensor got = request.get_tensor(name);
    if (got.shape() != expected.shape()) return false;
    const auto e = expected.to_vector<float>(), g = got.to_vector<float>();
    for (size_t i = 0; i < e.size(); ++i)  // merged batches may sum in another order
      if (std::fabs(e[i] - g[i]) > 1e-4f * (1.f + std::fabs(e[i]))) return false;
  }
  return true;
}

struct Tally {
  std::atomic<int64_t> done{0};  // requests that completed (any outcome), sync or async
  std::atomic<int64_t> ok{0}, cancelled{0}, timed_out{0}, refused_shape{0};
  std::atomic<int64_t> wrong_output{0}, unexpected{0};
  std::atomic<int64_t> async_started{0}, callbacks{0}, callback_throws{0};
  std::mutex mutex;
  std::string first_unexpected;

  void note_unexpected(const std::string& what) {
    ++unexpected;
    std::lock_guard<std::mutex> lock(mutex);
    if (first_unexpected.empty()) first_unexpected = what;
  }
};

// Classifies a completed request's outcome by its exception.
void record_outcome(Tally& tally, const std::function<void()>& rethrow) {
  try {
    rethrow();
    ++tally.ok;
  } catch (const Cancelled&) {
    ++tally.cancelled;
  } catch (const RequestTimeout&) {
    ++tally.timed_out;
  } catch (const std::exception& e) {
    tally.note_unexpected(e.what());
  }
}

// One client thread: each iteration picks a kind of request.
void client(CompiledModel& compiled, const std::vector<Case>& cases, Tally& tally,
            std::atomic<int64_t>& budget, const Clock::time_point deadline, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> percent(0, 99);
  std::uniform_int_distribution<size_t> pick(0, cases.size() - 1);
  constexpr size_t pool_size = 8;  // async requests in flight per thread
  std::vector<InferRequest> pool;
  std::vector<size_t> pool_case(pool_size);
  std::vector<bool> pool_busy(pool_size, false);
  for (size_t i = 0; i < pool_size; ++i) pool.push_back(compiled.create_infer_request());
  InferRequest sync = compiled.create_infer_request();
  size_t next = 0;
  auto bind = [&](InferRequest& r, const Case& k) {
    for (const auto& [name, t] : k.inputs) r.set_tensor(name, t);
  };
  auto run_sync = [&](InferRequest& r, const Case& k) {
    bool succeeded = false;
    record_outcome(tally, [&] {
      r.infer();
      succeeded = true;
    });
    if (succeeded && !outputs_match(r, k)) ++tally.wrong_output;
    ++tally.done;
  };
  auto reap = [&](size_t slot) {  // waits for the slot's request; its callback counted it
    if (!pool_busy[slot]) return;
    try {
      pool[slot].wait();
      if (!outputs_match(pool[slot], cases[pool_case[slot]])) ++tally.wrong_output;
    } catch (const Error&) {  // classified by the callback
    }
    pool_busy[slot] = false;
  };
  while (Clock::now() < deadline && budget.fetch_sub(1) > 0) {
    const int p = percent(rng);
    const size_t c = pick(rng);
    if (p < 35) {  // synchronous
      bind(sync, cases[c]);
      run_sync(sync, cases[c]);
    } else if (p < 80) {  // asynchronous with a callback; every tenth callback throws
      const size_t slot = next++ % pool_size;
      reap(slot);
      InferRequest& r = pool[slot];
      bind(r, cases[c]);
      const bool throws = p % 10 == 0;
      r.set_callback([&tally, throws](std::exception_ptr e) {
        ++tally.callbacks;
        record_outcome(tally, [&] {
          if (e) std::rethrow_exception(e);
        });
        ++tally.done;
        if (throws) {
          ++tally.callback_throws;
          throw std::runtime_error("a throwing callback");
        }
      });
      pool_case[slot] = c;
      pool_busy[slot] = true;
      ++tally.async_started;
      r.start_async();
      if (p >= 70) r.cancel();  // cancelled before, while or after it runs
    } else if (p < 90) {        // a queue timeout of 1-200 us
      bind(sync, cases[c]);
      sync.set_timeout(std::chrono::microseconds(1 + percent(rng) * 2));
      run_sync(sync, cases[c]);
      sync.set_timeout(std::chrono::microseconds(0));
    } else {  // a wrong-shaped input, refused before it runs
      const ValueInfo& in = compiled.inputs().front();
      std::vector<int64_t> dims;
      for (int64_t d : in.shape.dims()) dims.push_back(d == Shape::dynamic ? 1 : d);
      dims.back() += 1;
      try {
        sync.set_tensor(in.name, Tensor(ElementType::f32, Shape(dims)));
        sync.infer();
        tally.note_unexpected("a wrong-shaped input was accepted");
      } catch (const TensorMismatch&) {
        ++tally.refused_shape;
      } catch (const InvalidArgument&) {
        ++tally.refused_shape;
      }
      ++tally.done;
    }
  }
  for (size_t slot = 0; slot < pool_size; ++slot) reap(slot);
}

}  // namespace

int main(int argc, char** argv) try {
  const Options opt = parse(argc, argv);
  Core core;
  std::shared_ptr<Model> model = opt.model.empty() ? make_mlp() : core.read_model(opt.model);
  CompiledModel compiled = core.compile_model(model, "CPU",
                                              {{props::performance_mode, "THROUGHPUT"},
                                               {"max_batch_size", 8},
                                               {"max_queue_delay_microseconds", 100},
                                               {"allow_timeout_override", true},
                                               {"timeout_action", "REJECT"}});
  const std::vector<Case> cases = make_cases(compiled, 16);

  Tally tally;
  std::atomic<int64_t> budget{opt.requests};
  const auto start = Clock::now();
  const auto deadline = start + std::chrono::duration_cast<Clock::duration>(
                                    std::chrono::duration<double>(opt.seconds));
  std::atomic<bool> finished{false};
  std::ofstream csv(opt.csv);
  csv << "seconds,rss_mib,requests_done,requests_per_second\n";
  std::vector<double> rss_samples;
  std::thread sampler([&] {
    int64_t last_done = 0;
    for (int tick = 1; !finished.load(); ++tick) {
      const auto when = start + std::chrono::seconds(tick);
      while (!finished.load() && Clock::now() < when)
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
      if (finished.load()) break;
      const int64_t done = tally.done.load();
      const double rss = static_cast<double>(apps::resident_bytes()) / (1 << 20);
      rss_samples.push_back(rss);
      csv << tick << ',' << rss << ',' << done << ',' << (done - last_done) << '\n' << std::flush;
      last_done = done;
    }
  });
  std::vector<std::thread> clients;
  for (int t = 0; t < opt.threads; ++t)
    clients.emplace_back(client, std::ref(compiled), std::cref(cases), std::ref(tally),
                         std::ref(budget), deadline, 1000u + static_cast<unsigned>(t));
  for (auto& c : clients) c.join();
  finished = true;
  sampler.join();
  const double elapsed = std::chrono::duration<double>(Clock::now() - start).count();

  // RSS over the last 80% of the samples, against the sample where that part begins.
  double growth = 0;
  const size_t warm = rss_samples.size() / 5;
  if (rss_samples.size() >= 5) {
    const double base = rss_samples[warm];
    const double peak =
        *std::max_element(rss_samples.begin() + static_cast<long>(warm), rss_samples.end());
    growth = (peak - base) / base;
  }
  const bool once = tally.callbacks.load() == tally.async_started.load();
  const bool flat = rss_samples.size() >= 5 && growth < opt.max_growth;
  const bool clean = tally.unexpected.load() == 0 && tally.wrong_output.load() == 0;
  std::printf(
      "{\"requests\": %lld, \"seconds\": %.1f, \"requests_per_second\": %.0f, \"threads\": %d,\n"
      " \"ok\": %lld, \"cancelled\": %lld, \"timed_out\": %lld, \"refused_wrong_shape\": %lld,\n"
      " \"async_started\": %lld, \"callbacks\": %lld, \"callbacks_thrown\": %lld,\n"
      " \"wrong_outputs\": %lld, \"unexpected_errors\": %lld, \"first_unexpected\": \"%s\",\n"
      " \"rss_mib_first\": %.1f, \"rss_mib_at_20pct\": %.1f, \"rss_mib_last\": %.1f,"
      " \"rss_growth_last_80pct\": %.4f, \"samples\": %zu,\n"
      " \"exactly_once\": %s, \"rss_flat\": %s, \"clean\": %s}\n",
      static_cast<long long>(tally.done.load()), elapsed, tally.done.load() / elapsed, opt.threads,
      static_cast<long long>(tally.ok.load()), static_cast<long long>(tally.cancelled.load()),
      static_cast<long long>(tally.timed_out.load()),
      static_cast<long long>(tally.refused_shape.load()),
      static_cast<long long>(tally.async_started.load()),
      static_cast<long long>(tally.callbacks.load()),
      static_cast<long long>(tally.callback_throws.load()),
      static_cast<long long>(tally.wrong_output.load()),
      static_cast<long long>(tally.unexpected.load()), tally.first_unexpected.c_str(),
      rss_samples.empty() ? 0 : rss_samples.front(),
      rss_samples.size() > warm ? rss_samples[warm] : 0,
      rss_samples.empty() ? 0 : rss_samples.back(), growth, rss_samples.size(),
      once ? "true" : "false", flat ? "true" : "false", clean ? "true" : "false");
  return once && flat && clean ? 0 : 1;
} catch (const std::exception& e) {
  std::fprintf(stderr, "troupe_soak: %s\n", e.what());
  return 2;
}
