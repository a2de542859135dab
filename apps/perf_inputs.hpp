#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "apps/perf_model.hpp"
#include "troupe/tensor.hpp"

namespace troupe::apps {

/// One input tensor as every request sends it.
struct InputData {
  TensorSpec spec;   // the shape is concrete: the one sent
  Tensor tensor;     // dense; its bytes are what the binary forms carry
  std::string file;  // the .npy it was read from; empty: random
};

/// An input for each of `specs`: read from the `files` that name it ("NAME=FILE.npy", or just
/// "FILE.npy" for a model with one input; converted to the input's datatype when that keeps its
/// meaning) or else random (seeded, so runs repeat: floats in [0,1), integers in [0,10)), with
/// each dynamic dimension 1. Throws PerfError for an unknown name, a file that cannot be read, a
/// shape that does not fit or a datatype troupe does not know (BYTES, UINT16, ...).
std::vector<InputData> make_inputs(const std::vector<TensorSpec>& specs,
                                   const std::vector<std::string>& files);

/// The elements as the flat JSON list of the protocol's "data" field.
nlohmann::json json_data(const InputData& input);

}  // namespace troupe::apps
