#include "engine/graph/scheduling_policy.hpp"

#include <algorithm>
#include <cctype>

#include <nlohmann/json.hpp>

#include "troupe/error.hpp"

namespace troupe::detail {

namespace {

constexpr const char* k_max_batch_size = "max_batch_size";
constexpr const char* k_preferred = "preferred_batch_size";
constexpr const char* k_delay = "max_queue_delay_microseconds";
constexpr const char* k_ordering = "preserve_ordering";
constexpr const char* k_levels = "priority_levels";
constexpr const char* k_default_level = "default_priority_level";
constexpr const char* k_queue_size = "max_queue_size";
constexpr const char* k_timeout = "default_timeout_microseconds";
constexpr const char* k_action = "timeout_action";
constexpr const char* k_override = "allow_timeout_override";
constexpr const char* k_priority_policy = "priority_queue_policy";
constexpr const char* k_aging = "priority_aging_microseconds";
constexpr const char* k_adaptive = "adaptive_batch_size";
constexpr const char* k_top_stream = "top_priority_stream";

int64_t in_range(const std::string& key, const Any& value, int64_t lo, int64_t hi) {
  const int64_t n = value.as_int();
  if (n < lo || n > hi)
    throw InvalidArgument("property " + key + ": '" + value.as_string() +
                          "' is not allowed (allowed: " + std::to_string(lo) + ".." +
                          std::to_string(hi) + ")");
  return n;
}

std::vector<int64_t> parse_sizes(const std::string& key, const Any& value) {
  std::vector<std::string> words;
  if (std::holds_alternative<std::vector<std::string>>(value.storage())) {
    words = value.as_strings();
  } else {
    std::string text = value.as_string();
    std::replace(text.begin(), text.end(), ',', ' ');
    words = Any(text).as_strings();
  }
  std::vector<int64_t> sizes;
  for (const std::string& w : words) sizes.push_back(in_range(key, Any(w), 1, 4096));
  std::sort(sizes.begin(), sizes.end());
  sizes.erase(std::unique(sizes.begin(), sizes.end()), sizes.end());
  return sizes;
}

std::string upper(std::string s) {
  for (char& c : s) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return s;
}

}  // namespace

int SchedulingPolicy::level_of(int64_t priority) const {
  if (priority == 0) return (default_priority_level > 0 ? default_priority_level : levels()) - 1;
  if (priority < 0 || priority > levels())
    throw InvalidArgument("request priority " + std::to_string(priority) +
                          " is not allowed (allowed: 1.." + std::to_string(levels()) +
                          ", 1 = highest, or 0 for the default)");
  return static_cast<int>(priority) - 1;
}

int64_t SchedulingPolicy::timeout_of(int level, int64_t timeout_us) const {
  return timeout_under(queue_of(level), timeout_us);
}

int64_t SchedulingPolicy::timeout_under(const QueuePolicy& q, int64_t timeout_us) {
  if (timeout_us < 0)
    throw InvalidArgument("request timeout " + std::to_string(timeout_us) +
                          " us is not allowed (allowed: >= 0)");
  if (timeout_us == 0 || !q.allow_timeout_override) return q.default_timeout_us;
  if (q.default_timeout_us == 0) return timeout_us;
  return std::min(timeout_us, q.default_timeout_us);
}

bool SchedulingPolicy::is_top_level(int64_t priority) const {
  if (levels() < 2 || priority < 0 || priority > levels()) return false;
  return level_of(priority) == 0;
}

bool SchedulingPolicy::is_default() const {
  return max_batch_size <= 1 && priority_levels == 0 && queue.max_queue_size == 0 &&
         queue.default_timeout_us == 0 && !queue.allow_timeout_override && !preserve_ordering &&
         priority_queue_policy.empty() && priority_aging_us == 0;
}

const std::vector<std::string>& scheduling_property_names() {
  static const std::vector<std::string> names = {
      k_max_batch_size,  k_preferred,  k_delay,    k_ordering,  k_levels,
      k_default_level,   k_queue_size, k_timeout,  k_action,    k_override,
      k_priority_policy, k_aging,      k_adaptive, k_top_stream};
  return names;
}

bool is_scheduling_property(const std::string& key) {
  const auto& names = scheduling_property_names();
  return std::find(names.begin(), names.end(), key) != names.end();
}

namespace {

// One field of a queue policy (the queue keys above), shared by the default policy's properties
// and the per-level objects of priority_queue_policy.
void apply_queue_field(QueuePolicy& q, const std::string& key, const Any& value) {
  if (key == k_queue_size) {
    q.max_queue_size = in_range(key, value, 0, 1'000'000);
  } else if (key == k_timeout) {
    q.default_timeout_us = in_range(key, value, 0, 3'600'000'000LL);
  } else if (key == k_action) {
    const std::string a = upper(value.as_string());
    if (a == "REJECT")
      q.timeout_action = TimeoutAction::reject;
    else if (a == "DELAY")
      q.timeout_action = TimeoutAction::delay;
    else
      throw InvalidArgument("property " + key + ": '" + value.as_string() +
                            "' is not allowed (allowed: REJECT, DELAY)");
  } else if (key == k_override) {
    q.allow_timeout_override = value.as_bool();
  } else {
    throw InvalidArgument("'" + key + "' is not a queue policy field (allowed: " + k_queue_size +
                          ", " + k_timeout + ", " + k_action + ", " + k_override + ")");
  }
}

Any any_of_json(const nlohmann::json& v) {
  if (v.is_boolean()) return Any(v.get<bool>());
  if (v.is_number_integer()) return Any(v.get<int64_t>());
  if (v.is_string()) return Any(v.get<std::string>());
  throw InvalidArgument("'" + v.dump() + "' is not a bool, integer or string");
}

// priority_queue_policy as JSON text: {"LEVEL": {FIELD: VALUE, ...}, ...}, LEVEL 1-based; the
// fields a level leaves out are those of the default queue policy (whenever it is set). "" or
// "{}" clears it.
std::map<int, AnyMap> parse_priority_queue_policy(const Any& value) {
  const std::string text = value.as_string();
  std::map<int, AnyMap> levels;
  if (text.empty()) return levels;
  const nlohmann::json doc = nlohmann::json::parse(text, nullptr, false);
  if (doc.is_discarded() || !doc.is_object())
    throw InvalidArgument("'" + text +
                          "' is not a JSON object of priority levels, e.g. "
                          "{\"1\": {\"max_queue_size\": 8, \"timeout_action\": \"DELAY\"}}");
  for (const auto& [level_text, fields] : doc.items()) {
    int level = 0;
    try {
      level = static_cast<int>(in_range("priority level", Any(level_text), 1, 64));
    } catch (const InvalidArgument&) {
      throw InvalidArgument("priority level '" + level_text +
                            "' is not allowed (allowed: 1..64, 1 = highest)");
    }
    if (!fields.is_object())
      throw InvalidArgument("priority level " + level_text + ": '" + fields.dump() +
                            "' is not a JSON object of queue policy fields");
    QueuePolicy scratch;  // checks each field's value now, where its level can be named
    AnyMap& own = levels[level];
    for (const auto& [field, v] : fields.items()) {
      try {
        own[field] = any_of_json(v);
        apply_queue_field(scratch, field, own[field]);
      } catch (const InvalidArgument& e) {
        throw InvalidArgument("priority level " + level_text + ": " + e.what());
      }
    }
  }
  return levels;
}

// What get_property reports: each level's policy in full.
std::string priority_queue_policy_text(const SchedulingPolicy& p) {
  if (p.priority_queue_policy.empty()) return "";
  nlohmann::json doc = nlohmann::json::object();
  for (const auto& [level, fields] : p.priority_queue_policy) {
    const QueuePolicy q = p.queue_of(level - 1);
    doc[std::to_string(level)] = {
        {k_queue_size, q.max_queue_size},
        {k_timeout, q.default_timeout_us},
        {k_action, q.timeout_action == TimeoutAction::reject ? "REJECT" : "DELAY"},
        {k_override, q.allow_timeout_override}};
  }
  return doc.dump();
}

}  // namespace

QueuePolicy SchedulingPolicy::queue_of(int level) const {
  QueuePolicy q = queue;
  auto it = priority_queue_policy.find(level + 1);
  if (it != priority_queue_policy.end())
    for (const auto& [field, value] : it->second) apply_queue_field(q, field, value);
  return q;
}

void apply_scheduling_property(SchedulingPolicy& p, const std::string& key, const Any& value) {
  try {
    if (key == k_max_batch_size) {
      p.max_batch_size = static_cast<int>(in_range(key, value, 1, 256));
    } else if (key == k_preferred) {
      p.preferred_batch_sizes = parse_sizes(key, value);
    } else if (key == k_delay) {
      p.max_queue_delay_us = in_range(key, value, 0, 60'000'000);
    } else if (key == k_ordering) {
      p.preserve_ordering = value.as_bool();
    } else if (key == k_levels) {
      p.priority_levels = static_cast<int>(in_range(key, value, 0, 64));
    } else if (key == k_default_level) {
      p.default_priority_level = static_cast<int>(in_range(key, value, 0, 64));
    } else if (key == k_queue_size || key == k_timeout || key == k_action || key == k_override) {
      apply_queue_field(p.queue, key, value);
    } else if (key == k_priority_policy) {
      p.priority_queue_policy = parse_priority_queue_policy(value);
    } else if (key == k_aging) {
      p.priority_aging_us = in_range(key, value, 0, 3'600'000'000LL);
    } else if (key == k_adaptive) {
      p.adaptive_batch_size = value.as_bool();
    } else if (key == k_top_stream) {
      p.top_priority_stream = value.as_bool();
    } else {
      throw InvalidArgument("property " + key + " is not a scheduling property");
    }
  } catch (const InvalidArgument& e) {
    const std::string what = e.what();
    if (what.rfind("property ", 0) == 0) throw;
    throw InvalidArgument("property " + key + ": " + what);
  }
}

void validate(const SchedulingPolicy& p) {
  if (p.default_priority_level > p.levels() ||
      (p.priority_levels == 0 && p.default_priority_level > 1))
    throw InvalidArgument("property " + std::string(k_default_level) + ": " +
                          std::to_string(p.default_priority_level) +
                          " is not allowed (allowed: 1.." + std::to_string(p.levels()) +
                          " with priority_levels=" + std::to_string(p.priority_levels) + ")");
  for (const auto& [level, q] : p.priority_queue_policy)
    if (level > p.levels())
      throw InvalidArgument("property " + std::string(k_priority_policy) + ": priority level " +
                            std::to_string(level) + " is not allowed (allowed: 1.." +
                            std::to_string(p.levels()) +
                            " with priority_levels=" + std::to_string(p.priority_levels) + ")");
  if (p.top_priority_stream && p.priority_levels < 2)
    throw InvalidArgument("property " + std::string(k_top_stream) +
                          ": YES needs priority_levels >= 2 (it is " +
                          std::to_string(p.priority_levels) + ")");
  for (int64_t s : p.preferred_batch_sizes)
    if (s > p.max_batch_size)
      throw InvalidArgument("property " + std::string(k_preferred) + ": " + std::to_string(s) +
                            " is larger than max_batch_size " + std::to_string(p.max_batch_size));
}

AnyMap scheduling_properties(const SchedulingPolicy& p) {
  AnyMap m;
  m[k_max_batch_size] = p.max_batch_size;
  std::vector<std::string> preferred;
  for (int64_t s : p.preferred_batch_sizes) preferred.push_back(std::to_string(s));
  m[k_preferred] = preferred;
  m[k_delay] = p.max_queue_delay_us;
  m[k_ordering] = p.preserve_ordering;
  m[k_levels] = p.priority_levels;
  m[k_default_level] = p.default_priority_level;
  m[k_queue_size] = p.queue.max_queue_size;
  m[k_timeout] = p.queue.default_timeout_us;
  m[k_action] = std::string(p.queue.timeout_action == TimeoutAction::reject ? "REJECT" : "DELAY");
  m[k_override] = p.queue.allow_timeout_override;
  m[k_priority_policy] = priority_queue_policy_text(p);
  m[k_aging] = p.priority_aging_us;
  m[k_adaptive] = p.adaptive_batch_size;
  m[k_top_stream] = p.top_priority_stream;
  return m;
}

}  // namespace troupe::detail
