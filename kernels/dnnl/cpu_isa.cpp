// The effective ISA is oneDNN's own answer (dnnl::get_effective_cpu_isa), so troupe's choices and
// oneDNN's kernels always agree on what the CPU may run.
#include "kernels/cpu_isa.hpp"

#include <cpuid.h>
#include <oneapi/dnnl/dnnl.hpp>

namespace troupe::kernels {

namespace {

bool includes(dnnl::cpu_isa isa, dnnl::cpu_isa feature) {
  const auto bits = static_cast<unsigned>(feature);
  return (static_cast<unsigned>(isa) & bits) == bits;
}

const char* isa_name(dnnl::cpu_isa isa) {
  switch (isa) {
    case dnnl::cpu_isa::sse41:
      return "sse41";
    case dnnl::cpu_isa::avx:
      return "avx";
    case dnnl::cpu_isa::avx2:
      return "avx2";
    case dnnl::cpu_isa::avx2_vnni:
      return "avx2_vnni";
    case dnnl::cpu_isa::avx512_core:
      return "avx512_core";
    case dnnl::cpu_isa::avx512_core_vnni:
      return "avx512_core_vnni";
    case dnnl::cpu_isa::avx512_core_bf16:
      return "avx512_core_bf16";
    case dnnl::cpu_isa::avx512_core_amx:
      return "avx512_core_amx";
    default:
      return "other";
  }
}

bool cpuid_bit(unsigned leaf, unsigned subleaf, int reg, unsigned bit) {
  unsigned r[4];
  if (!__get_cpuid_count(leaf, subleaf, &r[0], &r[1], &r[2], &r[3])) return false;
  return (r[reg] >> bit) & 1u;
}

}  // namespace

const CpuIsa& effective_cpu_isa() {
  static const CpuIsa isa = [] {
    const dnnl::cpu_isa effective = dnnl::get_effective_cpu_isa();
    CpuIsa out;
    out.name = isa_name(effective);
    out.avx2 = includes(effective, dnnl::cpu_isa::avx2);
    out.avx512 = includes(effective, dnnl::cpu_isa::avx512_core);
    out.vnni = includes(effective, dnnl::cpu_isa::avx512_core_vnni) ||
               includes(effective, dnnl::cpu_isa::avx2_vnni);
    out.bf16 = includes(effective, dnnl::cpu_isa::avx512_core_bf16);
    out.amx = includes(effective, dnnl::cpu_isa::avx512_core_amx);
    return out;
  }();
  return isa;
}

const CpuIsa& hardware_cpu_isa() {
  static const CpuIsa isa = [] {
    CpuIsa out;
    out.avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    out.avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                 __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq");
    const bool avx_vnni = cpuid_bit(7, 1, 0, 4);  // CPUID.(7,1):EAX[4]
    out.vnni = (out.avx512 && __builtin_cpu_supports("avx512vnni")) || (out.avx2 && avx_vnni);
    const bool avx512_bf16 = cpuid_bit(7, 1, 0, 5);              // EAX[5]
    out.amx = cpuid_bit(7, 0, 3, 22) && cpuid_bit(7, 0, 3, 24);  // EDX: AMX-BF16, -TILE
    out.bf16 = (out.avx512 && avx512_bf16) || out.amx;
    out.name = out.amx                  ? "avx512_core_amx"
               : out.bf16 && out.vnni   ? "avx512_core_bf16"
               : out.avx512 && out.vnni ? "avx512_core_vnni"
               : out.avx512             ? "avx512_core"
               : out.vnni               ? "avx2_vnni"
               : out.avx2               ? "avx2"
                                        : "other";
    return out;
  }();
  return isa;
}

}  // namespace troupe::kernels
