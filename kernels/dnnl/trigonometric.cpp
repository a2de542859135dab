// Sin and Cos on f32 (oneDNN has no such eltwise): positional encodings compute them at run time
// over every input (NeRF's frequencies of each point: 10% of an 8-layer NeRF MLP's time on the
// reference, one libm call per element). Computed in double, as the reference is: the argument
// reduced by multiples of pi/2 (pi/2 split in three parts, exact for the arguments taken here),
// then sine and cosine polynomials on [-pi/4, pi/4] with errors near double's rounding, so the
// result rounds to the reference's float but for rare ties. Arguments beyond 2^20 or not finite
// take libm's path for the whole tensor. Vectorized per ISA; chunks spread over the stream's
// threads.

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "kernels/dnnl/chunked_loop.hpp"
#include "kernels/dnnl/dnnl_backend.hpp"
#include "kernels/dnnl/dnnl_kernel.hpp"
#include "kernels/dnnl/vector_exp.hpp"

namespace troupe::kernels::onednn {

namespace {

// sin(r) and cos(r) for |r| <= pi/4: Taylor terms to r^17 and r^16 (truncation below 1e-17).
inline double sin_near_zero(double r) {
  const double r2 = r * r;
  double p = -1.0 / 355687428096000.0;  // -1/17!, then alternating down to 1/3!
  p = p * r2 + 1.0 / 1307674368000.0;
  p = p * r2 - 1.0 / 6227020800.0;
  p = p * r2 + 1.0 / 39916800.0;
  p = p * r2 - 1.0 / 362880.0;
  p = p * r2 + 1.0 / 5040.0;
  p = p * r2 - 1.0 / 120.0;
  p = p * r2 + 1.0 / 6.0;
  return r - r * r2 * p;
}
inline double cos_near_zero(double r) {
  const double r2 = r * r;
  double p = 1.0 / 20922789888000.0;  // 1/16!
  p = p * r2 - 1.0 / 87178291200.0;
  p = p * r2 + 1.0 / 479001600.0;
  p = p * r2 - 1.0 / 3628800.0;
  p = p * r2 + 1.0 / 40320.0;
  p = p * r2 - 1.0 / 720.0;
  p = p * r2 + 1.0 / 24.0;
  p = p * r2 - 0.5;
  return 1.0 + r2 * p;
}

// sin(x) (shift 0) or cos(x) (shift 1 = a quarter turn ahead) of |x| <= 2^20.
template <int shift>
inline float trig(float value) {
  const double x = value;
  const double k = std::nearbyint(x * 0.63661977236758134308);  // x / (pi/2)
  // pi/2 = a + b + c with a, b of 33 significant bits: k * a and k * b are exact for |k| < 2^20.
  const double r =
      ((x - k * 1.5707963267341256) - k * 6.077100506303966e-11) - k * 2.0222662487959506e-21;
  const auto quadrant = static_cast<int64_t>(k) + shift;
  const double s = sin_near_zero(r), c = cos_near_zero(r);
  const double v = (quadrant & 1) ? c : s;
  return static_cast<float>((quadrant & 2) ? -v : v);
}

TROUPE_ISA_CLONES void sin_array(const float* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = trig<0>(x[i]);
}
TROUPE_ISA_CLONES void cos_array(const float* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = trig<1>(x[i]);
}

class TrigonometricKernel final : public Kernel {
 public:
  explicit TrigonometricKernel(const KernelRequest& r) : cosine_(r.node.op_type == "Cos") {
    if (!all_f32(r)) throw Unsupported{};
  }

  std::string implementation() const override { return "dnnl:trigonometric"; }

  void execute(const std::vector<Tensor>& in, std::vector<Tensor>& out) override {
    const float* x = in[0].data<float>();
    float* y = out[0].data<float>();
    for_each_chunk(in[0].size(), 4096, [&](int64_t begin, int64_t count) {
      bool reducible = true;
      for (int64_t i = begin; i < begin + count; ++i)
        reducible &= std::fabs(x[i]) <= 1048576.0f;  // false for NaN too
      if (reducible) {
        (cosine_ ? cos_array : sin_array)(x + begin, y + begin, count);
      } else {
        for (int64_t i = begin; i < begin + count; ++i)
          y[i] = static_cast<float>(cosine_ ? std::cos(static_cast<double>(x[i]))
                                            : std::sin(static_cast<double>(x[i])));
      }
    });
  }

 private:
  bool cosine_;
};

}  // namespace

void register_trigonometric(KernelRegistry& registry) {
  registry.add(backend_name, backend_priority, "Sin", construct_kernel<TrigonometricKernel>);
  registry.add(backend_name, backend_priority, "Cos", construct_kernel<TrigonometricKernel>);
}

}  // namespace troupe::kernels::onednn
