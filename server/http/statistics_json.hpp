#pragma once

#include <memory>
#include <vector>

#include <nlohmann/json.hpp>

#include "server/served_model.hpp"

namespace troupe::server {

/// The statistics extension's `model_stats` entry of one model version (Triton's semantics):
/// inference_stats success/fail as the server saw them; queue = time requests waited between
/// pipeline stages, compute_input = preprocess + upload, compute_infer = execute,
/// compute_output = download + postprocess; batch_stats per executed batch size.
nlohmann::json model_statistics(ServedModel& model);

/// {"model_stats": [...]} for the given models.
nlohmann::json statistics_document(const std::vector<std::shared_ptr<ServedModel>>& models);

}  // namespace troupe::server
