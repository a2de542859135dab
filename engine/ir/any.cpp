#include "troupe/any.hpp"

#include <algorithm>
#include <cctype>
#include <sstream>

#include "troupe/error.hpp"

namespace troupe {

namespace {
std::string upper(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::toupper(c); });
  return s;
}
}  // namespace

bool Any::as_bool() const {
  if (auto* b = std::get_if<bool>(&v_)) return *b;
  if (auto* i = std::get_if<int64_t>(&v_)) {
    if (*i == 0 || *i == 1) return *i == 1;
  }
  if (auto* s = std::get_if<std::string>(&v_)) {
    const std::string u = upper(*s);
    if (u == "YES" || u == "TRUE" || u == "1" || u == "ON") return true;
    if (u == "NO" || u == "FALSE" || u == "0" || u == "OFF") return false;
  }
  throw InvalidArgument("'" + as_string() + "' is not a boolean (expected YES/NO or true/false)");
}

int64_t Any::as_int() const {
  if (auto* i = std::get_if<int64_t>(&v_)) return *i;
  if (auto* b = std::get_if<bool>(&v_)) return *b ? 1 : 0;
  if (auto* d = std::get_if<double>(&v_)) {
    if (static_cast<double>(static_cast<int64_t>(*d)) == *d) return static_cast<int64_t>(*d);
  }
  if (auto* s = std::get_if<std::string>(&v_)) {
    try {
      size_t used = 0;
      int64_t v = std::stoll(*s, &used);
      if (used == s->size()) return v;
    } catch (const std::exception&) {
    }
  }
  throw InvalidArgument("'" + as_string() + "' is not an integer");
}

double Any::as_double() const {
  if (auto* d = std::get_if<double>(&v_)) return *d;
  if (auto* i = std::get_if<int64_t>(&v_)) return static_cast<double>(*i);
  if (auto* s = std::get_if<std::string>(&v_)) {
    try {
      size_t used = 0;
      double v = std::stod(*s, &used);
      if (used == s->size()) return v;
    } catch (const std::exception&) {
    }
  }
  throw InvalidArgument("'" + as_string() + "' is not a number");
}

std::string Any::as_string() const {
  struct Visitor {
    std::string operator()(std::monostate) const { return ""; }
    std::string operator()(bool b) const { return b ? "YES" : "NO"; }
    std::string operator()(int64_t i) const { return std::to_string(i); }
    std::string operator()(double d) const {
      std::ostringstream os;
      os << d;
      return os.str();
    }
    std::string operator()(const std::string& s) const { return s; }
    std::string operator()(const std::vector<std::string>& list) const {
      std::string out;
      for (const auto& s : list) out += (out.empty() ? "" : " ") + s;
      return out;
    }
  };
  return std::visit(Visitor{}, v_);
}

std::vector<std::string> Any::as_strings() const {
  if (auto* l = std::get_if<std::vector<std::string>>(&v_)) return *l;
  std::vector<std::string> out;
  std::istringstream is(as_string());
  for (std::string word; is >> word;) out.push_back(word);
  return out;
}

}  // namespace troupe
