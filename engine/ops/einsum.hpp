#pragma once

// The Einsum equation, shared by its shape inference (engine/ops/linear_algebra.cpp) and its
// reference kernel, so that both read an equation the same way (numpy's einsum rules, which ONNX
// follows).

#include <algorithm>
#include <cstddef>
#include <string>
#include <vector>

namespace troupe::einsum {

// Labels are numbers: the letters A-Z, a-z are 0..51 (so sorting labels sorts letters the way
// numpy's implicit output does), and the dimensions an ellipsis stands for are 52, 53, ...,
// right-aligned across the inputs as in broadcasting.
inline constexpr int ellipsis_label = 52;

struct Equation {
  std::vector<std::vector<int>> inputs;  // per input, the label of each dimension
  std::vector<int> output;               // the label of each output dimension
  size_t ellipsis_rank = 0;              // how many dimensions '...' stands for (the widest)
  std::string error;                     // why the equation does not fit; empty when it does
};

inline int letter_label(char c) {
  if (c >= 'A' && c <= 'Z') return c - 'A';
  if (c >= 'a' && c <= 'z') return 26 + (c - 'a');
  return -1;
}

// Whether `labels` (an operand's or the output's) holds `label`.
inline bool has_label(const std::vector<int>& labels, int label) {
  return std::find(labels.begin(), labels.end(), label) != labels.end();
}

inline std::string label_name(int label) {
  if (label >= ellipsis_label) return "...";
  return std::string(1, static_cast<char>(label < 26 ? 'A' + label : 'a' + (label - 26)));
}

// One term of the equation: its letters' labels, and where '...' stood (-1 when absent).
struct Term {
  std::vector<int> letters;
  int ellipsis_at = -1;
};

inline bool parse_term(const std::string& text, Term& term, std::string& error) {
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (c == '.') {
      if (text.compare(i, 3, "...") != 0 || term.ellipsis_at >= 0) {
        error = "term '" + text + "' has a '.' outside a single '...'";
        return false;
      }
      term.ellipsis_at = static_cast<int>(term.letters.size());
      i += 2;
    } else if (letter_label(c) >= 0) {
      term.letters.push_back(letter_label(c));
    } else {
      error = "term '" + text + "' has the character '" + std::string(1, c) +
              "'; subscripts must be letters";
      return false;
    }
  }
  return true;
}

// Reads `equation` ("ij,jk->ik", "...ii", " bij , bjk ") for inputs of the given ranks.
inline Equation parse(const std::string& equation, const std::vector<size_t>& ranks) {
  Equation eq;
  std::string text;
  for (char c : equation)
    if (c != ' ') text += c;
  const size_t arrow = text.find("->");
  const std::string lhs = text.substr(0, arrow);
  std::vector<std::string> terms;
  for (size_t start = 0;;) {
    const size_t comma = lhs.find(',', start);
    terms.push_back(lhs.substr(start, comma == std::string::npos ? comma : comma - start));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  if (terms.size() != ranks.size()) {
    eq.error = "equation '" + equation + "' has " + std::to_string(terms.size()) +
               " input terms but the node has " + std::to_string(ranks.size()) + " inputs";
    return eq;
  }
  std::vector<Term> parsed(terms.size());
  for (size_t i = 0; i < terms.size(); ++i) {
    if (!parse_term(terms[i], parsed[i], eq.error)) return eq;
    const size_t letters = parsed[i].letters.size();
    const bool has_ellipsis = parsed[i].ellipsis_at >= 0;
    if (letters > ranks[i] || (!has_ellipsis && letters != ranks[i])) {
      eq.error = "term '" + terms[i] + "' has " + std::to_string(letters) +
                 " subscripts but input " + std::to_string(i) + " has rank " +
                 std::to_string(ranks[i]) + (has_ellipsis ? "" : " (and no '...')");
      return eq;
    }
    if (has_ellipsis) eq.ellipsis_rank = std::max(eq.ellipsis_rank, ranks[i] - letters);
  }
  // Each input's labels, its '...' taking the last of the ellipsis labels.
  std::vector<int> count(ellipsis_label, 0);
  for (size_t i = 0; i < parsed.size(); ++i) {
    const Term& term = parsed[i];
    std::vector<int>& labels = eq.inputs.emplace_back();
    const size_t covered = ranks[i] - term.letters.size();
    for (size_t d = 0; d < term.letters.size(); ++d) {
      if (static_cast<int>(d) == term.ellipsis_at)
        for (size_t e = eq.ellipsis_rank - covered; e < eq.ellipsis_rank; ++e)
          labels.push_back(ellipsis_label + static_cast<int>(e));
      labels.push_back(term.letters[d]);
      ++count[static_cast<size_t>(term.letters[d])];
    }
    if (term.ellipsis_at == static_cast<int>(term.letters.size()))
      for (size_t e = eq.ellipsis_rank - covered; e < eq.ellipsis_rank; ++e)
        labels.push_back(ellipsis_label + static_cast<int>(e));
  }
  auto ellipsis_labels = [&] {
    for (size_t e = 0; e < eq.ellipsis_rank; ++e)
      eq.output.push_back(ellipsis_label + static_cast<int>(e));
  };
  if (arrow == std::string::npos) {
    // Implicit output: the ellipsis dimensions, then the letters used once, alphabetically.
    ellipsis_labels();
    for (int label = 0; label < ellipsis_label; ++label)
      if (count[static_cast<size_t>(label)] == 1) eq.output.push_back(label);
    return eq;
  }
  const std::string rhs = text.substr(arrow + 2);
  Term out;
  if (!parse_term(rhs, out, eq.error)) return eq;
  if (out.ellipsis_at < 0 && eq.ellipsis_rank > 0) {
    eq.error = "the output term '" + rhs + "' has no '...' but the inputs' '...' stands for " +
               std::to_string(eq.ellipsis_rank) + " dimensions";
    return eq;
  }
  std::vector<bool> seen(ellipsis_label, false);
  for (size_t d = 0; d <= out.letters.size(); ++d) {
    if (static_cast<int>(d) == out.ellipsis_at) ellipsis_labels();
    if (d == out.letters.size()) break;
    const int label = out.letters[d];
    if (count[static_cast<size_t>(label)] == 0 || seen[static_cast<size_t>(label)]) {
      eq.error = "the output term '" + rhs + "' has '" + label_name(label) + "' " +
                 (seen[static_cast<size_t>(label)] ? "more than once" : "which no input has");
      return eq;
    }
    seen[static_cast<size_t>(label)] = true;
    eq.output.push_back(label);
  }
  return eq;
}

}  // namespace troupe::einsum
