#include "kernels/dnnl/conv_timing.hpp"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <map>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "kernels/dnnl/dnnl_kernel.hpp"
#include "kernels/omp_threads.hpp"

namespace troupe::kernels::onednn {

namespace {

dnnl::memory zeroed(const dnnl::memory::desc& desc) {
  dnnl::memory m(desc, cpu_engine());
  if (desc.get_size() > 0) std::memset(m.get_data_handle(), 0, desc.get_size());
  return m;
}

}  // namespace

double time_convolution(const dnnl::convolution_forward::primitive_desc& pd, bool with_bias) {
  // One thread: each throughput stream runs on one, and the two kernels' ratio is what counts.
  const detail::ScopedOmpThreads one_thread(1);
  const dnnl::convolution_forward primitive(pd);
  // A scratchpad of its own, freed with the rest: the thread's shared one (Primitive) would keep
  // the larger of the two kernels' for as long as the compiling thread lives.
  std::unordered_map<int, dnnl::memory> args = {
      {DNNL_ARG_SRC, zeroed(pd.src_desc())},
      {DNNL_ARG_WEIGHTS, zeroed(pd.weights_desc())},
      {DNNL_ARG_DST, zeroed(pd.dst_desc())},
      {DNNL_ARG_SCRATCHPAD, zeroed(pd.scratchpad_desc())}};
  if (with_bias) args[DNNL_ARG_BIAS] = zeroed(pd.bias_desc());
  dnnl::stream stream(cpu_engine());
  constexpr int runs = 5;
  std::vector<double> us;
  for (int i = 0; i <= runs; ++i) {
    const auto start = std::chrono::steady_clock::now();
    primitive.execute(stream, args);
    stream.wait();
    const auto end = std::chrono::steady_clock::now();
    if (i > 0) us.push_back(std::chrono::duration<double, std::micro>(end - start).count());
  }
  std::nth_element(us.begin(), us.begin() + runs / 2, us.end());
  return us[runs / 2];
}

bool faster_convolution(const std::string& shape_key,
                        const dnnl::convolution_forward::primitive_desc& candidate,
                        const dnnl::convolution_forward::primitive_desc& baseline, bool with_bias,
                        double margin) {
  static std::mutex mutex;
  static std::map<std::string, bool> answers;  // guarded by mutex
  {
    std::lock_guard<std::mutex> lock(mutex);
    const auto it = answers.find(shape_key);
    if (it != answers.end()) return it->second;
  }
  // Timed outside the lock: two kernels compiling at once time their own shapes (the same shape
  // timed twice gets one answer kept).
  const bool faster =
      time_convolution(candidate, with_bias) <= margin * time_convolution(baseline, with_bias);
  std::lock_guard<std::mutex> lock(mutex);
  return answers.emplace(shape_key, faster).first->second;
}

}  // namespace troupe::kernels::onednn
