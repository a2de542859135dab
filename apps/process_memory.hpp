#pragma once

// The process's own memory, as `troupe bench` reports it and the soak samples it.

#include <sys/resource.h>
#include <unistd.h>

#include <cstdint>
#include <fstream>

namespace troupe::apps {

/// Resident set size now, in bytes (/proc/self/statm); 0 where it cannot be read.
inline int64_t resident_bytes() {
  std::ifstream statm("/proc/self/statm");
  int64_t size_pages = 0, resident_pages = 0;
  if (!(statm >> size_pages >> resident_pages)) return 0;
  return resident_pages * static_cast<int64_t>(sysconf(_SC_PAGESIZE));
}

/// Peak resident set size so far, in bytes (getrusage's maxrss); 0 where it cannot be read.
inline int64_t peak_resident_bytes() {
  rusage usage{};
  return getrusage(RUSAGE_SELF, &usage) == 0 ? int64_t{usage.ru_maxrss} * 1024 : 0;
}

}  // namespace troupe::apps
