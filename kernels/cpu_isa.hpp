#pragma once

#include <string>

namespace troupe::kernels {

/// The instruction sets troupe's kernels use on this machine: what the CPU has, capped by
/// ONEDNN_MAX_CPU_ISA (or DNNL_MAX_CPU_ISA) exactly as oneDNN caps its own kernels. Every CPU check
/// in troupe (activation layouts, bf16 availability, device capabilities, the capabilities a
/// compiled blob needs, the tests' expectations) reads this, so an AVX-512 machine capped at
/// `avx2` behaves like an AVX2 machine.
struct CpuIsa {
  std::string name;     ///< oneDNN's name of the effective ISA: "avx2", "avx512_core_bf16", ...
  bool avx2 = false;    ///< AVX2 and FMA
  bool avx512 = false;  ///< AVX-512 F/BW/VL/DQ (oneDNN's avx512_core)
  bool vnni = false;    ///< int8 dot products: AVX512_VNNI, or AVX-VNNI on AVX2
  bool bf16 = false;    ///< native bf16 dot products: AVX512_BF16 or AMX
  bool amx = false;     ///< AMX tiles (int8 and bf16)
};

/// The effective ISA, read once: oneDNN fixes its cap at its first use in the process.
const CpuIsa& effective_cpu_isa();

/// The ISA of this CPU with no cap (cpuid), for messages and for tests that compare a capped run
/// with the machine.
const CpuIsa& hardware_cpu_isa();

}  // namespace troupe::kernels
