#pragma once

namespace troupe::apps {

// Keep in step with project(troupe VERSION ...) in CMakeLists.txt.
inline constexpr const char* version = "0.1.0";

}  // namespace troupe::apps
