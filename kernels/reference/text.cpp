// Reference kernels of TfIdfVectorizer (ONNX opset 9) over integer tokens: each row of X becomes
// the weighted counts of the pool's n-grams found in it (engine/ops/text.hpp says how); and of
// StringNormalizer (engine/ops/string_normalizer.hpp).

#include <string>
#include <vector>

#include "engine/ops/string_normalizer.hpp"
#include "engine/ops/text.hpp"
#include "kernels/reference/common.hpp"
#include "kernels/reference/element_types.hpp"
#include "kernels/reference/reference.hpp"

namespace troupe::kernels::reference {

namespace {

using Tensors = std::vector<Tensor>;

// X [C] is one row; X [N, C] is N rows of C tokens.
void tfidf_vectorizer(const Node& node, const Tensors& in, Tensors& out) {
  const text::NgramPool pool = text::read_ngram_pool(node);
  const Shape& x = in.at(0).shape();
  if (x.rank() != 1 && x.rank() != 2)
    fail(node, "input X has shape " + x.to_string() + ", expected [C] or [N, C]");
  const std::vector<int64_t> tokens = read_ints(node, in[0], "input X");
  const int64_t rows = x.rank() == 1 ? 1 : x[0];
  const int64_t columns = x.rank() == 1 ? x[0] : x[1];
  require_output_size(node, out.at(0), rows * pool.output_size);
  if (out[0].element_type() != ElementType::f32)
    unsupported_type(node, out[0].element_type(), "f32", "output Y");
  float* y = out[0].data<float>();
  for (int64_t r = 0; r < rows; ++r) {
    const auto begin = tokens.begin() + static_cast<std::ptrdiff_t>(r * columns);
    const std::vector<double> row =
        text::vectorize(pool, std::vector<int64_t>(begin, begin + columns));
    for (size_t k = 0; k < row.size(); ++k) *y++ = static_cast<float>(row[k]);
  }
}

void string_normalizer(const Node& node, const Tensors& in, Tensors& out) {
  const text::StringNormalizerSettings settings = text::read_string_normalizer(node);
  if (in.at(0).element_type() != ElementType::string)
    unsupported_type(node, in[0].element_type(), "string", "input X");
  const Tensor x = in[0].contiguous();
  std::vector<std::string> kept =
      text::normalize_strings(settings, x.data<std::string>(), static_cast<size_t>(x.size()));
  if (kept.empty()) kept.emplace_back();  // an emptied row becomes one empty string
  require_output_size(node, out.at(0), static_cast<int64_t>(kept.size()));
  std::move(kept.begin(), kept.end(), out[0].data<std::string>());
}

}  // namespace

void register_text(KernelRegistry& registry) {
  registry.add("reference", 0, "StringNormalizer", [](const KernelRequest& r) {
    return make_reference_kernel(r.node, &string_normalizer);
  });
  registry.add("reference", 0, "TfIdfVectorizer", [](const KernelRequest& r) {
    return make_reference_kernel(r.node, &tfidf_vectorizer);
  });
}

}  // namespace troupe::kernels::reference
