#pragma once

// `troupe info`: the devices troupe can compile for and their properties.

#include <string>

namespace CLI {
class App;
}

namespace troupe::apps {

struct InfoOptions {
  std::string device;  // empty: every available device
  bool ops = false;    // also list the op types the device runs
};

/// Adds the `info` subcommand to `app`, parsing into `options`.
CLI::App* add_info_command(CLI::App& app, InfoOptions& options);

/// Prints the information; returns the process exit code. Errors go to stderr.
int run_info(const InfoOptions& options);

}  // namespace troupe::apps
