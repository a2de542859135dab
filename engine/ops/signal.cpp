// Schemas of the signal-processing ops of ONNX opset 17: the windows (HannWindow, HammingWindow,
// BlackmanWindow), MelWeightMatrix, DFT and STFT. Their output lengths come from input values
// (a window's size, a DFT's length); when those inputs are not constants the dimension is dynamic
// and the runtime infers it again from the data.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "engine/ops/infer_helpers.hpp"
#include "engine/ops/op_schema.hpp"

namespace troupe {

namespace {

using infer::TypeClass;

// A scalar input (a size, a rate, a step): rank 0, or a single-element tensor, which exporters
// also produce.
void require_signal_scalar(const ShapeInferContext& ctx, size_t i) {
  const Shape& s = ctx.shape(i);
  if (s.rank() > 1 || (s.is_static() && s.element_count() != 1))
    ctx.fail(infer::input_label(ctx, i) + " must be a scalar, got shape " + s.to_string());
}

// The value of a scalar integer input when it is a constant.
std::optional<int64_t> constant_scalar(const ShapeInferContext& ctx, size_t i,
                                       const std::string& what) {
  const std::optional<std::vector<int64_t>> values = infer::constant_ints(ctx, i, what);
  if (!values || values->size() != 1) return std::nullopt;
  return values->front();
}

// The element type named by `output_datatype` (an ONNX TensorProto data type, default float).
ElementType output_datatype(const ShapeInferContext& ctx) {
  const int64_t dtype = ctx.node.attributes.get_int_or("output_datatype", 1);
  const ElementType type = infer::from_onnx_data_type(dtype);
  if (type == ElementType::undefined || type == ElementType::boolean)
    infer::unsupported(ctx, "attribute 'output_datatype' = " + std::to_string(dtype) +
                                " is not a supported numeric ONNX data type (supported: 1 f32, "
                                "2 u8, 3 i8, 6 i32, 7 i64, 10 f16, 11 f64, 16 bf16)");
  return type;
}

// HannWindow / HammingWindow / BlackmanWindow(size): a 1-D window of `size` values.
std::vector<ValueInfo> infer_window(const ShapeInferContext& ctx) {
  infer::require_type(ctx, 0, TypeClass::index);
  require_signal_scalar(ctx, 0);
  const int64_t periodic = ctx.node.attributes.get_int_or("periodic", 1);
  if (periodic != 0 && periodic != 1)
    ctx.fail("attribute periodic is " + std::to_string(periodic) + ", expected 0 or 1");
  const ElementType type = output_datatype(ctx);
  int64_t size = Shape::dynamic;
  if (const std::optional<int64_t> known = constant_scalar(ctx, 0, "size")) {
    if (*known < 0) ctx.fail("size is " + std::to_string(*known) + ", expected >= 0");
    size = *known;
  }
  return {infer::value_info(type, Shape{size})};
}

// MelWeightMatrix(num_mel_bins, dft_length, sample_rate, lower_edge_hertz, upper_edge_hertz):
// [floor(dft_length / 2) + 1, num_mel_bins].
std::vector<ValueInfo> infer_mel_weight_matrix(const ShapeInferContext& ctx) {
  for (size_t i = 0; i < 3; ++i) infer::require_type(ctx, i, TypeClass::index);
  for (size_t i = 3; i < 5; ++i) infer::require_type(ctx, i, TypeClass::floating);
  for (size_t i = 0; i < 5; ++i) require_signal_scalar(ctx, i);
  const ElementType type = output_datatype(ctx);
  int64_t mel_bins = Shape::dynamic;
  int64_t spectrogram_bins = Shape::dynamic;
  if (const std::optional<int64_t> known = constant_scalar(ctx, 0, "num_mel_bins")) {
    if (*known <= 0) ctx.fail("num_mel_bins is " + std::to_string(*known) + ", expected > 0");
    mel_bins = *known;
  }
  if (const std::optional<int64_t> known = constant_scalar(ctx, 1, "dft_length")) {
    if (*known <= 0) ctx.fail("dft_length is " + std::to_string(*known) + ", expected > 0");
    spectrogram_bins = *known / 2 + 1;
  }
  if (const std::optional<int64_t> known = constant_scalar(ctx, 2, "sample_rate"))
    if (*known <= 0) ctx.fail("sample_rate is " + std::to_string(*known) + ", expected > 0");
  return {infer::value_info(type, Shape{spectrogram_bins, mel_bins})};
}

// DFT(input, dft_length?): input [batch, n1, ..., nk, 1 or 2] (real or complex); the output is
// complex, [..., 2], with the transformed axis resized to dft_length (or floor(length / 2) + 1
// bins when onesided).
std::vector<ValueInfo> infer_dft(const ShapeInferContext& ctx) {
  infer::require_type(ctx, 0, TypeClass::floating);
  const Shape& in = ctx.shape(0);
  if (in.rank() < 3)
    ctx.fail("input must have shape [batch, n1, ..., 1 or 2] (rank >= 3), got " + in.to_string());
  const int64_t last = in[in.rank() - 1];
  if (last != Shape::dynamic && last != 1 && last != 2)
    ctx.fail("the last dimension of the input " + in.to_string() +
             " must be 1 (real) or 2 (complex)");
  // Axis 0 is the batch and the last holds the real and imaginary parts; the signal axes lie
  // between. A negative axis counts from the back as elsewhere (-2 is the last signal axis).
  const int64_t axis_attr = ctx.node.attributes.get_int_or("axis", 1);
  const size_t axis = infer::normalize_axis(ctx, axis_attr, in.rank());
  if (axis == 0 || axis == in.rank() - 1)
    ctx.fail("axis " + std::to_string(axis_attr) + " names the " +
             (axis == 0 ? "batch" : "real/imaginary") + " dimension of the input " +
             in.to_string() + "; expected a signal axis in [1, " + std::to_string(in.rank() - 2) +
             "]");
  const int64_t inverse = ctx.node.attributes.get_int_or("inverse", 0);
  const int64_t onesided = ctx.node.attributes.get_int_or("onesided", 0);
  if (inverse != 0 && inverse != 1)
    ctx.fail("attribute inverse is " + std::to_string(inverse) + ", expected 0 or 1");
  if (onesided != 0 && onesided != 1)
    ctx.fail("attribute onesided is " + std::to_string(onesided) + ", expected 0 or 1");
  // The spec: a one-sided output is only possible for a real input (whose spectrum is conjugate
  // symmetric).
  if (onesided == 1 && last == 2)
    ctx.fail("onesided is 1 but the input " + in.to_string() + " is complex");
  int64_t length = in[axis];
  if (ctx.has_input(1)) {
    infer::require_type(ctx, 1, TypeClass::index);
    require_signal_scalar(ctx, 1);
    length = Shape::dynamic;
    if (const std::optional<int64_t> known = constant_scalar(ctx, 1, "dft_length")) {
      if (*known <= 0) ctx.fail("dft_length is " + std::to_string(*known) + ", expected > 0");
      length = *known;
    }
  }
  std::vector<int64_t> out(in.begin(), in.end());
  out[axis] = onesided == 1 && length != Shape::dynamic ? length / 2 + 1 : length;
  out.back() = 2;
  return {infer::value_info(ctx.type(0), Shape(std::move(out)))};
}

// STFT(signal, frame_step, window?, frame_length?): signal [batch, length, 1 or 2]; the output is
// [batch, frames, bins, 2] with frames = (length - frame_length) / frame_step + 1 and bins =
// frame_length (floor(frame_length / 2) + 1 when onesided).
std::vector<ValueInfo> infer_stft(const ShapeInferContext& ctx) {
  infer::require_type(ctx, 0, TypeClass::floating);
  infer::require_type(ctx, 1, TypeClass::index);
  require_signal_scalar(ctx, 1);
  const Shape& signal = ctx.shape(0);
  if (signal.rank() != 3)
    ctx.fail("signal must have shape [batch, length, 1 or 2], got " + signal.to_string());
  if (signal[2] != Shape::dynamic && signal[2] != 1 && signal[2] != 2)
    ctx.fail("the last dimension of the signal " + signal.to_string() +
             " must be 1 (real) or 2 (complex)");
  const int64_t onesided = ctx.node.attributes.get_int_or("onesided", 1);
  if (onesided != 0 && onesided != 1)
    ctx.fail("attribute onesided is " + std::to_string(onesided) + ", expected 0 or 1");
  if (onesided == 1 && signal[2] == 2)
    ctx.fail("onesided is 1 but the signal " + signal.to_string() + " is complex");
  int64_t step = Shape::dynamic;
  if (const std::optional<int64_t> known = constant_scalar(ctx, 1, "frame_step")) {
    if (*known <= 0) ctx.fail("frame_step is " + std::to_string(*known) + ", expected > 0");
    step = *known;
  }
  // The frame length is the window's length, or the frame_length input; both must agree.
  const bool has_window = ctx.has_input(2);
  const bool has_frame_length = ctx.has_input(3);
  if (!has_window && !has_frame_length)
    ctx.fail("neither a window (input 2) nor a frame_length (input 3) gives the frame length");
  int64_t frame_length = Shape::dynamic;
  if (has_window) {
    infer::require_same_type(ctx, 0, 2);
    infer::require_rank(ctx, 2, 1);
    frame_length = ctx.shape(2)[0];
  }
  if (has_frame_length) {
    infer::require_type(ctx, 3, TypeClass::index);
    require_signal_scalar(ctx, 3);
    if (const std::optional<int64_t> known = constant_scalar(ctx, 3, "frame_length")) {
      if (*known <= 0) ctx.fail("frame_length is " + std::to_string(*known) + ", expected > 0");
      if (frame_length != Shape::dynamic && frame_length != *known)
        ctx.fail("frame_length " + std::to_string(*known) + " differs from the window's length " +
                 std::to_string(frame_length));
      frame_length = *known;
    }
  }
  int64_t frames = Shape::dynamic;
  if (signal[1] != Shape::dynamic && frame_length != Shape::dynamic && step != Shape::dynamic) {
    if (frame_length > signal[1])
      ctx.fail("frame length " + std::to_string(frame_length) + " exceeds the signal length " +
               std::to_string(signal[1]));
    frames = (signal[1] - frame_length) / step + 1;
  }
  int64_t bins = frame_length;
  if (onesided == 1 && frame_length != Shape::dynamic) bins = frame_length / 2 + 1;
  return {infer::value_info(ctx.type(0), Shape{signal[0], frames, bins, 2})};
}

}  // namespace

void register_signal_ops(OpSchemaRegistry& registry) {
  registry.add(OpSchema{"HannWindow", 1, 1, 1, 1, infer_window});
  registry.add(OpSchema{"HammingWindow", 1, 1, 1, 1, infer_window});
  registry.add(OpSchema{"BlackmanWindow", 1, 1, 1, 1, infer_window});
  registry.add(OpSchema{"MelWeightMatrix", 5, 5, 1, 1, infer_mel_weight_matrix});
  registry.add(OpSchema{"DFT", 1, 2, 1, 1, infer_dft});
  registry.add(OpSchema{"STFT", 2, 4, 1, 1, infer_stft});
}

}  // namespace troupe
