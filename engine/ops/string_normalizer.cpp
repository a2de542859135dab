#include "engine/ops/string_normalizer.hpp"

#include <locale.h>
#include <wctype.h>

#include <algorithm>
#include <cctype>
#include <cstdint>

#include "engine/ops/spatial.hpp"

namespace troupe::text {

namespace {

// glibc's built-in C.UTF-8 locale carries Unicode's case tables; without it, ASCII only.
locale_t utf8_locale() {
  static const locale_t locale = newlocale(LC_CTYPE_MASK, "C.UTF-8", nullptr);
  return locale;
}

// Decodes one UTF-8 code point at text[i]; returns its length, 0 for an invalid sequence.
size_t decode(const std::string& text, size_t i, uint32_t& code) {
  const auto byte = [&](size_t k) { return static_cast<uint8_t>(text[i + k]); };
  const uint8_t lead = byte(0);
  size_t length;
  if (lead < 0x80) {
    code = lead;
    return 1;
  } else if ((lead & 0xE0) == 0xC0) {
    length = 2;
    code = lead & 0x1F;
  } else if ((lead & 0xF0) == 0xE0) {
    length = 3;
    code = lead & 0x0F;
  } else if ((lead & 0xF8) == 0xF0) {
    length = 4;
    code = lead & 0x07;
  } else {
    return 0;
  }
  if (i + length > text.size()) return 0;
  for (size_t k = 1; k < length; ++k) {
    if ((byte(k) & 0xC0) != 0x80) return 0;
    code = code << 6 | (byte(k) & 0x3F);
  }
  static constexpr uint32_t smallest[] = {0, 0, 0x80, 0x800, 0x10000};
  if (code < smallest[length] || code > 0x10FFFF || (code >= 0xD800 && code <= 0xDFFF)) return 0;
  return length;
}

void encode(uint32_t code, std::string& out) {
  if (code < 0x80) {
    out += static_cast<char>(code);
  } else if (code < 0x800) {
    out += static_cast<char>(0xC0 | code >> 6);
    out += static_cast<char>(0x80 | (code & 0x3F));
  } else if (code < 0x10000) {
    out += static_cast<char>(0xE0 | code >> 12);
    out += static_cast<char>(0x80 | (code >> 6 & 0x3F));
    out += static_cast<char>(0x80 | (code & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | code >> 18);
    out += static_cast<char>(0x80 | (code >> 12 & 0x3F));
    out += static_cast<char>(0x80 | (code >> 6 & 0x3F));
    out += static_cast<char>(0x80 | (code & 0x3F));
  }
}

uint32_t map_code(uint32_t code, CaseChange change) {
  const locale_t locale = utf8_locale();
  if (!locale) {
    if (code >= 0x80) return code;
    return static_cast<uint32_t>(change == CaseChange::lower ? tolower(static_cast<int>(code))
                                                             : toupper(static_cast<int>(code)));
  }
  const auto wide = static_cast<wint_t>(code);
  return static_cast<uint32_t>(change == CaseChange::lower ? towlower_l(wide, locale)
                                                           : towupper_l(wide, locale));
}

}  // namespace

std::string change_case(const std::string& text, CaseChange change) {
  if (change == CaseChange::none) return text;
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size();) {
    uint32_t code = 0;
    const size_t length = decode(text, i, code);
    if (length == 0) {  // not UTF-8: the byte passes unchanged
      out += text[i++];
      continue;
    }
    encode(map_code(code, change), out);
    i += length;
  }
  return out;
}

StringNormalizerSettings read_string_normalizer(const Node& node) {
  StringNormalizerSettings s;
  const std::string action = node.attributes.get_string_or("case_change_action", "NONE");
  if (action == "LOWER")
    s.case_change = CaseChange::lower;
  else if (action == "UPPER")
    s.case_change = CaseChange::upper;
  else if (action != "NONE")
    spatial::fail(node, "attribute 'case_change_action' is '" + action +
                            "', expected 'LOWER', 'UPPER' or 'NONE'");
  s.case_sensitive = node.attributes.get_int_or("is_case_sensitive", 0) != 0;
  s.stopwords = node.attributes.get_strings_or("stopwords", {});
  if (!s.case_sensitive)
    for (std::string& word : s.stopwords) word = change_case(word, CaseChange::lower);
  std::sort(s.stopwords.begin(), s.stopwords.end());
  return s;
}

std::vector<std::string> normalize_strings(const StringNormalizerSettings& settings,
                                           const std::string* row, size_t count) {
  std::vector<std::string> kept;
  for (size_t i = 0; i < count; ++i) {
    const std::string key =
        settings.case_sensitive ? row[i] : change_case(row[i], CaseChange::lower);
    if (std::binary_search(settings.stopwords.begin(), settings.stopwords.end(), key)) continue;
    kept.push_back(change_case(row[i], settings.case_change));
  }
  return kept;
}

}  // namespace troupe::text
