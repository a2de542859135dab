#pragma once

// File access shared by the .troupe format and the model cache.

#include <cstdint>
#include <functional>
#include <memory>
#include <ostream>
#include <string>

namespace troupe::serialization {

/// A whole file in memory: mapped (copy-on-write, so stray writes never reach the file) or, where
/// mapping fails, read into a 64-byte-aligned buffer. `owner` keeps the bytes alive.
struct FileBytes {
  const unsigned char* data = nullptr;
  uint64_t size = 0;
  std::shared_ptr<void> owner;
  bool mapped = false;
};

/// Throws InvalidArgument naming `path` and the system's reason when the file cannot be read.
FileBytes map_file(const std::string& path, const char* what);

/// Creates `path` by running `write` on a temporary file next to it and renaming that into place,
/// so concurrent readers see the old file or the complete new one, never a partial one, and
/// concurrent writers leave one complete file. Throws InvalidArgument naming `path` on failure
/// (the temporary file is removed).
void write_file_atomically(const std::string& path,
                           const std::function<void(std::ostream&)>& write);

}  // namespace troupe::serialization
