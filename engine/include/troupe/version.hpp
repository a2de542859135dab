#pragma once

/// troupe's version, "major.minor.patch". Compiled blobs record it and are refused by any other
/// version. Kept equal to project(troupe VERSION ...) in CMakeLists.txt (checked at build time).
#define TROUPE_VERSION "0.1.0"

namespace troupe {

/// The version this library was built as (TROUPE_VERSION).
inline constexpr const char* library_version = TROUPE_VERSION;

}  // namespace troupe
