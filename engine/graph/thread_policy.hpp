#pragma once

#include <cstdint>
#include <vector>

#include "engine/graph/compile_config.hpp"
#include "kernels/omp_threads.hpp"
#include "troupe/model.hpp"

namespace troupe::detail {

/// Multiply-accumulates of one inference in the compute-heavy nodes (Conv, ConvTranspose, MatMul,
/// Gemm and their integer forms) of a model; dynamic dimensions count as 1, nodes with dynamic
/// weights as zero. Those of integer nodes are divided by `integer_divisor` (to compare their
/// cost with f32 work).
int64_t estimate_macs(const Model& model, int64_t integer_divisor = 1);

/// The same count for one node whose inputs and outputs are `inputs` and `outputs`.
int64_t node_macs(const Node& node, const std::vector<ValueInfo>& inputs,
                  const std::vector<ValueInfo>& outputs, int64_t integer_divisor = 1);

/// The same count for one node of `model`.
int64_t node_macs(const Model& model, const Node& node, int64_t integer_divisor = 1);

/// Whether idle OpenMP threads go to sleep at once (OMP_WAIT_POLICY=passive or GOMP_SPINCOUNT=0)
/// rather than spin for a while (libgomp's default): waking a sleeping thread costs tens of
/// microseconds per parallel region on a VM.
bool openmp_threads_sleep_when_idle();

/// The OpenMP thread count a node should be created and run with in a stream of `stream_threads`:
/// 1 when its estimated time on one core (its multiply-accumulates and the bytes it reads and
/// writes) is too short for a parallel region's wake-up to pay, 0 (the stream's count) otherwise.
int node_threads(const Node& node, const std::vector<ValueInfo>& inputs,
                 const std::vector<ValueInfo>& outputs, int stream_threads);

/// Gives each stream one thread when the model's nodes are too small to split: every OpenMP
/// parallel region wakes the team, and an op of a few microseconds gets slower, not faster, on
/// two threads. With idle threads that sleep, when its compute nodes are small on average; with
/// spinning ones, when no node would split (node_threads); either way when the model is small
/// enough to run on the scheduler (its requests then run on the submitting thread). Only when
/// the user set no thread count and one stream would run several.
void fit_threads_to_model(CompileConfig& config, const Model& model);

/// How many times the smallest run of `model` (dynamic dimensions 1) may be scaled and still be a
/// small model (one thread, fit_threads_to_model); below 1, not even that one.
int64_t scheduler_scale(const Model& model);

/// How many times the smallest run of `model` may be scaled and still run on the actor
/// scheduler's workers once its stream has one thread (choose_execute_threads): a bound four
/// times scheduler_scale's, since a run that one thread serves anyway loses only the wake-ups.
int64_t worker_scale(const Model& model);

/// Runs the execute stages of a small model on the actor scheduler's `workers` instead of a thread
/// per stream: a graph run of tens of microseconds is then a stage handler like the others, and a
/// request no longer wakes a stream thread to reach execute and a worker to leave it. Only with
/// one thread per stream, no more streams than workers, no automatic batching and a model whose
/// run stays around a millisecond on one core (its multiply-accumulates and the data it moves).
/// Dynamic dimensions count as 1; scheduled_input_elements_limit bounds how much larger a request
/// may be and still run on a worker. Call after fit_threads_to_model and fit_batching_to_graph.
void choose_execute_threads(CompileConfig& config, const Model& model, size_t workers);

}  // namespace troupe::detail
