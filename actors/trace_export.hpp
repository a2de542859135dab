#pragma once

#include <string>
#include <vector>

#include "actors/request_state.hpp"

namespace troupe::detail {

/// Chrome Trace Event / Perfetto JSON of a run: one track per stage actor and per execute stream
/// (complete events, so the stage's occupancy is visible), each request as an async event with its
/// stages nested (so overlapping requests render side by side), flow arrows linking one request's
/// stages, and per-op spans inside execute when the traces carry op timings (`op_names` by node).
std::string chrome_trace_json(const std::vector<RequestTrace>& traces, int execute_streams,
                              const std::vector<std::string>& op_names);

/// An SVG picture of stage occupancy over time: one lane per stage (and per execute stream), a bar
/// per request span, coloured by request.
std::string timeline_svg(const std::vector<RequestTrace>& traces, int execute_streams);

}  // namespace troupe::detail
