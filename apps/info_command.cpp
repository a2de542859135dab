#include "apps/info_command.hpp"

#include <cstdlib>
#include <iostream>

#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include "engine/ops/op_schema.hpp"
#include "kernels/cpu_isa.hpp"
#include "kernels/kernel_registry.hpp"
#include "troupe/core.hpp"
#include "troupe/error.hpp"
#include "troupe/properties.hpp"
#include "troupe/version.hpp"

namespace troupe::apps {

namespace {

std::string join(const std::vector<std::string>& items, const std::string& sep) {
  std::string out;
  for (const auto& s : items) out += (out.empty() ? "" : sep) + s;
  return out;
}

// Prints `items` wrapped at about 100 columns, indented.
void print_wrapped(const std::vector<std::string>& items, const std::string& indent) {
  std::string line = indent;
  for (const auto& item : items) {
    if (line.size() + item.size() + 1 > 100 && line.size() > indent.size()) {
      fmt::print("{}\n", line);
      line = indent;
    }
    line += (line.size() > indent.size() ? " " : "") + item;
  }
  if (line.size() > indent.size()) fmt::print("{}\n", line);
}

int info(const InfoOptions& o) {
  Core core;
  fmt::print("troupe {}\n", library_version);
  fmt::print("{:<34}{}\n", "model formats (read_model)",
             join(core.supported_model_formats(), ", "));
  const std::vector<std::string> devices = core.available_devices();
  fmt::print("{:<34}{}\n", "available devices", join(devices, ", "));
  // The ISA troupe's kernels use; ONEDNN_MAX_CPU_ISA caps it below the CPU's.
  const kernels::CpuIsa& isa = kernels::effective_cpu_isa();
  const kernels::CpuIsa& cpu = kernels::hardware_cpu_isa();
  const char* cap = std::getenv("ONEDNN_MAX_CPU_ISA");
  fmt::print("{:<34}{}{}\n", "instruction set", isa.name,
             cap && *cap ? fmt::format(" (ONEDNN_MAX_CPU_ISA={}; this CPU: {})", cap, cpu.name)
                         : std::string());

  std::vector<std::string> selected = devices;
  if (!o.device.empty()) selected = {o.device};
  for (const auto& device : selected) {
    fmt::print("\n[ {} ]\n", device);
    const std::vector<std::string> names =
        core.get_property(device, props::supported_properties).as_strings();
    for (const auto& name : names) {
      if (name == props::supported_properties) continue;
      std::string value;
      try {
        value = core.get_property(device, name).as_string();
      } catch (const Error& e) {
        value = std::string("<") + e.what() + ">";
      }
      fmt::print("{:<34}{}\n", name, value.empty() ? "(not set)" : value);
    }
    if (o.ops) {
      const auto& kernels = kernels::KernelRegistry::instance();
      std::vector<std::string> supported;
      for (const auto& op : OpSchemaRegistry::instance().op_types())
        if (kernels.has_op(op)) supported.push_back(op);
      fmt::print("{:<34}{}\n", "op types with a kernel", supported.size());
      print_wrapped(supported, "  ");
    }
  }
  return 0;
}

}  // namespace

CLI::App* add_info_command(CLI::App& app, InfoOptions& o) {
  CLI::App* cmd = app.add_subcommand(
      "info",
      "Show the devices troupe can compile for, their properties and defaults, and the "
      "model formats it reads.");
  cmd->add_option("-d,--device", o.device, "Show only this device (default: every device)")
      ->option_text("NAME");
  cmd->add_flag("--ops", o.ops, "Also list the op types the device can run");
  return cmd;
}

int run_info(const InfoOptions& options) {
  try {
    return info(options);
  } catch (const std::exception& e) {
    std::cerr << "troupe info: error: " << e.what() << "\n";
    return 1;
  }
}

}  // namespace troupe::apps
