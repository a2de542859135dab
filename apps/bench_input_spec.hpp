#pragma once

// What the command line says about the model's inputs: -shape, -b, -mean_values, -scale_values
// and -i. A list is given per input, "name[a,b],other[c]", or as "[a,b]" alone for the only
// input, which the maps below key as "".

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "troupe/model.hpp"
#include "troupe/shape.hpp"
#include "troupe/tensor.hpp"

namespace troupe::apps {

using ShapeSpec = std::map<std::string, std::vector<int64_t>>;
using ValueSpec = std::map<std::string, std::vector<float>>;
using GivenInputs = std::map<std::string, Tensor>;

/// -shape's text as input name -> dimensions. Throws InvalidArgument on a malformed list or a
/// dimension that is not a positive integer.
ShapeSpec parse_shapes(const std::string& text);

/// The text of `option` (-mean_values or -scale_values, as errors name it) as input name ->
/// values. Throws InvalidArgument on a malformed list or an item that is not a number.
ValueSpec parse_values(const std::string& option, const std::string& text);

/// The values given for input `name` (or, for a model with one input, without a name); null when
/// none are.
const std::vector<float>* values_for(const ValueSpec& values, const std::string& name,
                                     size_t input_count);

/// Throws InvalidArgument "<option>: the model has no input '<name>'" unless `has_input(name)`;
/// the unnamed entry "" stands for the only input, so it needs a model with exactly one.
void require_input(const std::string& option, const std::string& name, size_t input_count,
                   const std::function<bool(const std::string&)>& has_input);

/// -i's "NAME=FILE.npy" items (a bare FILE.npy for the only input, keyed "") read as tensors.
/// Throws InvalidArgument naming the item when it has no file or the file is no readable .npy.
GivenInputs read_input_files(const std::vector<std::string>& items);

/// `shapes` with the shape of each input given by a file added; InvalidArgument when -shape gives
/// that input another one.
ShapeSpec with_file_shapes(ShapeSpec shapes, const GivenInputs& given);

/// The shape a request's tensor for `info` gets: -shape, then -b on the first dimension, then any
/// dimension still dynamic set to 1 (and `had_dynamic` set). A static dimension cannot be changed:
/// InvalidArgument says which one.
Shape run_shape(const ValueInfo& info, const ShapeSpec& shapes, size_t input_count, int64_t batch,
                bool& had_dynamic);

}  // namespace troupe::apps
