// Linked into every gtest binary. The isa-avx2 ctest cases run the suites with oneDNN (and so
// troupe, kernels/cpu_isa.hpp) capped at AVX2 to cover the AVX2 paths on a larger machine. Where
// the cap changes nothing (the machine's top ISA is AVX2), those cases repeat the uncapped run:
// they skip, saying so.
#include <gtest/gtest.h>

#include <cstdlib>

#include "kernels/cpu_isa.hpp"

namespace {

class IsaCapEnvironment : public ::testing::Environment {
 public:
  void SetUp() override {
    const char* cap = std::getenv("ONEDNN_MAX_CPU_ISA");
    if (cap == nullptr || *cap == '\0') return;
    const troupe::kernels::CpuIsa& effective = troupe::kernels::effective_cpu_isa();
    const troupe::kernels::CpuIsa& hardware = troupe::kernels::hardware_cpu_isa();
    if (effective.avx512 == hardware.avx512 && effective.vnni == hardware.vnni &&
        effective.bf16 == hardware.bf16 && effective.amx == hardware.amx)
      GTEST_SKIP() << "ONEDNN_MAX_CPU_ISA=" << cap
                   << " changes nothing on this CPU (its top ISA is " << hardware.name
                   << "): the uncapped run covers it";
  }
};

const ::testing::Environment* const isa_cap_environment =
    ::testing::AddGlobalTestEnvironment(new IsaCapEnvironment);

}  // namespace
