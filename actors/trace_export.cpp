#include "actors/trace_export.hpp"

#include <algorithm>
#include <set>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "troupe/profiling_info.hpp"

namespace troupe::detail {

namespace {

constexpr int pid = 1;

// Track (thread id) of a stage span: stages 1..5, execute stream s at 10 + s.
int track_of(size_t stage, const StageSpan& span) {
  return stage == static_cast<size_t>(Stage::execute) ? 10 + span.worker
                                                      : static_cast<int>(stage) + 1;
}

std::string track_name(size_t stage, int stream) {
  std::string name = stage_names[stage];
  if (stage == static_cast<size_t>(Stage::execute))
    name += " [stream " + std::to_string(stream) + "]";
  return name;
}

int64_t first_timestamp(const std::vector<RequestTrace>& traces) {
  int64_t t0 = traces.empty() ? 0 : traces.front().submitted_ns;
  for (const auto& t : traces) t0 = std::min(t0, t.submitted_ns);
  return t0;
}

}  // namespace

std::string chrome_trace_json(const std::vector<RequestTrace>& traces, int execute_streams,
                              const std::vector<std::string>& op_names) {
  using nlohmann::json;
  const int64_t t0 = first_timestamp(traces);
  auto us = [t0](int64_t ns) { return static_cast<double>(ns - t0) / 1000.0; };
  json events = json::array();
  events.push_back({{"ph", "M"},
                    {"pid", pid},
                    {"name", "process_name"},
                    {"args", {{"name", "troupe pipeline"}}}});
  for (size_t s = 0; s < stage_count; ++s) {
    const int workers = s == static_cast<size_t>(Stage::execute) ? execute_streams : 1;
    for (int w = 0; w < workers; ++w) {
      StageSpan span;
      span.worker = w;
      const int tid = track_of(s, span);
      events.push_back({{"ph", "M"},
                        {"pid", pid},
                        {"tid", tid},
                        {"name", "thread_name"},
                        {"args", {{"name", track_name(s, w)}}}});
      events.push_back({{"ph", "M"},
                        {"pid", pid},
                        {"tid", tid},
                        {"name", "thread_sort_index"},
                        {"args", {{"sort_index", tid}}}});
    }
  }
  std::set<std::pair<int, int64_t>> ops_drawn;  // (track, start) of execute spans
  for (const RequestTrace& t : traces) {
    const std::string request = "request " + std::to_string(t.run_id);
    // The request as an async slice from submission to completion, its stages nested in it.
    events.push_back({{"ph", "b"},
                      {"pid", pid},
                      {"cat", "request"},
                      {"id", t.run_id},
                      {"name", request},
                      {"ts", us(t.submitted_ns)}});
    bool first_flow = true;
    size_t last_stage = 0;
    for (size_t s = 0; s < stage_count; ++s)
      if (t.stages[s].end_ns != 0) last_stage = s;
    for (size_t s = 0; s < stage_count; ++s) {
      const StageSpan& span = t.stages[s];
      if (span.end_ns == 0) continue;
      const int tid = track_of(s, span);
      const double dur = static_cast<double>(span.end_ns - span.start_ns) / 1000.0;
      json args = {{"request", t.run_id}, {"cpu_us", span.cpu_ns / 1000.0}};
      if (span.batch > 1) args["batch"] = span.batch;  // requests sharing this run
      events.push_back({{"ph", "X"},
                        {"pid", pid},
                        {"tid", tid},
                        {"cat", "stage"},
                        {"name", request},
                        {"ts", us(span.start_ns)},
                        {"dur", dur},
                        {"args", args}});
      events.push_back({{"ph", "b"},
                        {"pid", pid},
                        {"cat", "request"},
                        {"id", t.run_id},
                        {"name", stage_names[s]},
                        {"ts", us(span.start_ns)}});
      events.push_back({{"ph", "e"},
                        {"pid", pid},
                        {"cat", "request"},
                        {"id", t.run_id},
                        {"name", stage_names[s]},
                        {"ts", us(span.end_ns)}});
      // Flow arrows from stage to stage, bound to the enclosing stage slices.
      json flow = {{"pid", pid},
                   {"tid", tid},
                   {"cat", "flow"},
                   {"id", t.run_id},
                   {"name", "request flow"},
                   {"ts", us(span.start_ns)},
                   {"bp", "e"}};
      flow["ph"] = first_flow ? "s" : (s == last_stage ? "f" : "t");
      events.push_back(flow);
      first_flow = false;
      // The requests of one merged run share its op timings: those are drawn once.
      if (s == static_cast<size_t>(Stage::execute) && ops_drawn.insert({tid, span.start_ns}).second)
        for (size_t n = 0; n < t.ops.size(); ++n) {
          const OpTiming& op = t.ops[n];
          if (op.start_ns == 0) continue;
          events.push_back({{"ph", "X"},
                            {"pid", pid},
                            {"tid", tid},
                            {"cat", "op"},
                            {"name", n < op_names.size() ? op_names[n] : "op " + std::to_string(n)},
                            {"ts", us(op.start_ns)},
                            {"dur", op.real_ns / 1000.0},
                            {"args", {{"request", t.run_id}, {"cpu_us", op.cpu_ns / 1000.0}}}});
        }
    }
    events.push_back({{"ph", "e"},
                      {"pid", pid},
                      {"cat", "request"},
                      {"id", t.run_id},
                      {"name", request},
                      {"ts", us(t.completed_ns)}});
  }
  json doc = {{"traceEvents", events}, {"displayTimeUnit", "ms"}};
  return doc.dump();
}

std::string timeline_svg(const std::vector<RequestTrace>& traces, int execute_streams) {
  const int64_t t0 = first_timestamp(traces);
  int64_t t1 = t0 + 1;
  for (const auto& t : traces) t1 = std::max(t1, t.completed_ns);
  struct Lane {
    size_t stage;
    int worker;
  };
  std::vector<Lane> lanes;
  for (size_t s = 0; s < stage_count; ++s) {
    const int workers = s == static_cast<size_t>(Stage::execute) ? execute_streams : 1;
    for (int w = 0; w < workers; ++w) lanes.push_back({s, w});
  }
  const int label_w = 300, plot_w = 1000, lane_h = 28, top = 40;
  const int height = top + static_cast<int>(lanes.size()) * lane_h + 40;
  const double scale = static_cast<double>(plot_w) / static_cast<double>(t1 - t0);
  std::string svg = fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{}\" height=\"{}\" "
      "font-family=\"monospace\" font-size=\"12\">\n<rect width=\"100%\" height=\"100%\" "
      "fill=\"white\"/>\n<text x=\"10\" y=\"20\">troupe stage occupancy: {} requests over {:.2f} "
      "ms "
      "(colour = request)</text>\n",
      label_w + plot_w + 20, height, traces.size(), static_cast<double>(t1 - t0) / 1e6);
  for (size_t l = 0; l < lanes.size(); ++l) {
    const int y = top + static_cast<int>(l) * lane_h;
    svg += fmt::format("<text x=\"10\" y=\"{}\">{}</text>\n", y + 18,
                       track_name(lanes[l].stage, lanes[l].worker));
    svg += fmt::format("<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"#f4f4f4\"/>\n",
                       label_w, y + 2, plot_w, lane_h - 4);
  }
  for (const RequestTrace& t : traces) {
    const int hue = static_cast<int>((t.run_id * 47) % 360);
    for (size_t l = 0; l < lanes.size(); ++l) {
      const StageSpan& span = t.stages[lanes[l].stage];
      if (span.end_ns == 0 || span.worker != lanes[l].worker) continue;
      const double x = label_w + static_cast<double>(span.start_ns - t0) * scale;
      const double w = std::max(0.5, static_cast<double>(span.end_ns - span.start_ns) * scale);
      const int y = top + static_cast<int>(l) * lane_h;
      svg += fmt::format(
          "<rect x=\"{:.2f}\" y=\"{}\" width=\"{:.2f}\" height=\"{}\" fill=\"hsl({},70%,55%)\">"
          "<title>request {}: {:.1f} us</title></rect>\n",
          x, y + 4, w, lane_h - 8, hue, t.run_id,
          static_cast<double>(span.end_ns - span.start_ns) / 1e3);
    }
  }
  const int axis_y = top + static_cast<int>(lanes.size()) * lane_h + 15;
  for (int i = 0; i <= 4; ++i) {
    const int x = label_w + plot_w * i / 4;
    svg += fmt::format("<text x=\"{}\" y=\"{}\">{:.2f} ms</text>\n", x - 20, axis_y,
                       static_cast<double>(t1 - t0) / 1e6 * i / 4);
  }
  svg += "</svg>\n";
  return svg;
}

}  // namespace troupe::detail
