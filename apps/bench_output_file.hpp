#pragma once

// Writing one of the files `troupe bench` is asked for (report, trace, timeline, ...).

#include <string>

namespace troupe::apps {

/// Writes `text` to `path`; throws std::runtime_error "cannot write <kind> file '<path>'" when it
/// cannot.
void write_output_file(const std::string& path, const std::string& kind, const std::string& text);

}  // namespace troupe::apps
