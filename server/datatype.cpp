#include "server/datatype.hpp"

#include <array>
#include <utility>

namespace troupe::server {

namespace {
constexpr std::array<std::pair<ElementType, std::string_view>, 14> names = {{
    {ElementType::f32, "FP32"},
    {ElementType::f16, "FP16"},
    {ElementType::bf16, "BF16"},
    {ElementType::f64, "FP64"},
    {ElementType::i8, "INT8"},
    {ElementType::u8, "UINT8"},
    {ElementType::i16, "INT16"},
    {ElementType::u16, "UINT16"},
    {ElementType::i32, "INT32"},
    {ElementType::u32, "UINT32"},
    {ElementType::i64, "INT64"},
    {ElementType::u64, "UINT64"},
    {ElementType::boolean, "BOOL"},
    {ElementType::string, "BYTES"},
}};
}  // namespace

std::string_view kserve_datatype(ElementType type) {
  for (const auto& [t, name] : names)
    if (t == type) return name;
  return "UNDEFINED";
}

std::optional<ElementType> element_type_of_datatype(std::string_view datatype) {
  for (const auto& [t, name] : names)
    if (name == datatype) return t;
  return std::nullopt;
}

}  // namespace troupe::server
