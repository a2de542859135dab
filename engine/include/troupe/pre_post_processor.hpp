#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "troupe/element_type.hpp"
#include "troupe/model.hpp"

namespace troupe {

/// Layout of a 4-D image tensor.
enum class Layout { nchw, nhwc };
/// Channel order of a 3-channel image.
enum class ColorFormat { rgb, bgr };
/// Interpolation for resize.
enum class ResizeAlgorithm { nearest, linear };

std::string to_string(Layout layout);

/// The shape of a 4-D image tensor after a layout conversion (the same shape when from == to).
Shape layout_converted_shape(const Shape& shape, Layout from, Layout to);

/// One preprocessing step, run in declaration order by the preprocess stage actor.
struct PreprocessStep {
  enum class Kind {
    convert_element_type,
    convert_layout,
    resize,
    mean,
    scale,
    reverse_channels,
    convert_color,  // resolved by build() into reverse_channels (or nothing)
  };
  Kind kind = Kind::convert_element_type;
  ElementType element_type = ElementType::f32;          // convert_element_type
  Layout layout = Layout::nchw;                         // convert_layout: the layout to convert to
  ResizeAlgorithm algorithm = ResizeAlgorithm::linear;  // resize
  int64_t height = 0, width = 0;         // resize: the model's spatial size (filled in by build())
  std::vector<float> values;             // mean / scale: one per channel, or one
  ColorFormat color = ColorFormat::rgb;  // convert_color: the target format
};

/// How the caller's tensor for one model input looks and what turns it into the model's input.
/// `steps` already include the implicit ones (a final type/layout conversion to the model's).
struct InputPreprocessing {
  ValueInfo caller;  // name, element type and shape of the tensor the caller sets
  Layout caller_layout = Layout::nchw;
  ColorFormat caller_color = ColorFormat::rgb;
  std::vector<PreprocessStep> steps;
};

/// How the caller wants one model output: element type and layout (run by the postprocess stage).
struct OutputPostprocessing {
  ValueInfo caller;
  Layout model_layout = Layout::nchw;
  Layout caller_layout = Layout::nchw;
};

/// Pre- and postprocessing attached to a model, by input/output index.
struct PrePostProcessing {
  std::vector<std::optional<InputPreprocessing>> inputs;
  std::vector<std::optional<OutputPostprocessing>> outputs;
};

/// Declares what the caller feeds and gets, in the spirit of OpenVINO's PrePostProcessor:
///
///     PrePostProcessor ppp(model);
///     ppp.input("image").tensor().set_element_type(ElementType::u8).set_layout(Layout::nhwc)
///         .set_color_format(ColorFormat::bgr).set_spatial_static_shape(480, 640);
///     ppp.input("image").preprocess().convert_element_type(ElementType::f32)
///         .reverse_channels().resize(ResizeAlgorithm::linear).mean({123.7f, 116.3f, 103.5f})
///         .scale({58.4f, 57.1f, 57.4f});
///     ppp.output(0).tensor().set_element_type(ElementType::f16);
///     std::shared_ptr<Model> with_ppp = ppp.build();
///
/// The steps never become graph nodes: they run in the preprocess and postprocess stage actors,
/// overlapping with other requests' execution. The model input is taken to be NCHW (or as set by
/// `model().set_layout`) and RGB.
class PrePostProcessor {
 public:
  class InputTensorInfo {
   public:
    InputTensorInfo& set_element_type(ElementType type);
    InputTensorInfo& set_layout(Layout layout);
    InputTensorInfo& set_color_format(ColorFormat color);
    InputTensorInfo& set_spatial_static_shape(int64_t height, int64_t width);

   private:
    friend class PrePostProcessor;
    std::optional<ElementType> type_;
    std::optional<Layout> layout_;
    ColorFormat color_ = ColorFormat::rgb;
    int64_t height_ = -1, width_ = -1;
  };
  class PreprocessSteps {
   public:
    PreprocessSteps& convert_element_type(ElementType type = ElementType::f32);
    PreprocessSteps& convert_layout(Layout layout);
    PreprocessSteps& resize(ResizeAlgorithm algorithm);
    PreprocessSteps& mean(std::vector<float> values);
    PreprocessSteps& scale(std::vector<float> values);
    PreprocessSteps& reverse_channels();
    /// Converts to `color` (only RGB <-> BGR: reverses channels when it differs).
    PreprocessSteps& convert_color(ColorFormat color);

   private:
    friend class PrePostProcessor;
    PreprocessStep& add(PreprocessStep::Kind kind);
    std::vector<PreprocessStep> steps_;
  };
  class ModelInfo {
   public:
    ModelInfo& set_layout(Layout layout);

   private:
    friend class PrePostProcessor;
    Layout layout_ = Layout::nchw;
  };
  class InputInfo {
   public:
    InputTensorInfo& tensor() { return tensor_; }
    PreprocessSteps& preprocess() { return steps_; }
    ModelInfo& model() { return model_; }

   private:
    friend class PrePostProcessor;
    InputTensorInfo tensor_;
    PreprocessSteps steps_;
    ModelInfo model_;
  };
  class OutputTensorInfo {
   public:
    OutputTensorInfo& set_element_type(ElementType type);
    OutputTensorInfo& set_layout(Layout layout);

   private:
    friend class PrePostProcessor;
    std::optional<ElementType> type_;
    std::optional<Layout> layout_;
  };
  class OutputInfo {
   public:
    OutputTensorInfo& tensor() { return tensor_; }
    ModelInfo& model() { return model_; }

   private:
    friend class PrePostProcessor;
    OutputTensorInfo tensor_;
    ModelInfo model_;
  };

  explicit PrePostProcessor(std::shared_ptr<const Model> model);

  InputInfo& input(size_t index = 0);
  InputInfo& input(const std::string& name);
  OutputInfo& output(size_t index = 0);
  OutputInfo& output(const std::string& name);

  /// A copy of the model with the processing attached. Throws InvalidArgument naming the input
  /// when the declared steps cannot produce the model's input (e.g. mean on u8 data, a spatial
  /// size that differs without a resize, a step on a tensor that is not a 4-D image).
  std::shared_ptr<Model> build();

 private:
  std::shared_ptr<const Model> model_;
  std::vector<std::optional<InputInfo>> inputs_;
  std::vector<std::optional<OutputInfo>> outputs_;
};

}  // namespace troupe
