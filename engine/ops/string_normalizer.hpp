#pragma once

// StringNormalizer (ONNX opset 10): its settings and the normalization itself, shared by the
// schema (which sizes the output when the input is a constant) and the reference kernel, so the
// two agree on which strings survive.

#include <string>
#include <vector>

#include "troupe/model.hpp"

namespace troupe::text {

enum class CaseChange { none, lower, upper };

struct StringNormalizerSettings {
  CaseChange case_change = CaseChange::none;
  bool case_sensitive = false;
  /// Compared as given when case_sensitive, otherwise lower-cased (as are the inputs then).
  std::vector<std::string> stopwords;
};

/// Reads case_change_action, is_case_sensitive and stopwords; throws ModelError naming the node
/// for an unknown case_change_action. `locale` is accepted and not consulted: case mapping is
/// Unicode's simple one-to-one mapping of UTF-8 text (bytes that are not valid UTF-8 pass
/// unchanged).
StringNormalizerSettings read_string_normalizer(const Node& node);

/// The strings of `row` that are not stopwords, case-changed; ONNX's rule that a row left empty
/// becomes one empty string is the caller's (it decides the output's shape).
std::vector<std::string> normalize_strings(const StringNormalizerSettings& settings,
                                           const std::string* row, size_t count);

/// `text` with every code point mapped to lower (upper) case.
std::string change_case(const std::string& text, CaseChange change);

}  // namespace troupe::text
