#include "troupe/pre_post_processor.hpp"

#include <algorithm>

#include "troupe/error.hpp"

namespace troupe {

std::string to_string(Layout layout) {
  return layout == Layout::nchw ? "NCHW" : "NHWC";
}

Shape layout_converted_shape(const Shape& s, Layout from, Layout to) {
  if (from == to) return s;
  if (s.rank() != 4)
    throw InvalidArgument("a layout conversion needs a 4-D shape, got " + s.to_string());
  return from == Layout::nchw ? Shape{s[0], s[2], s[3], s[1]} : Shape{s[0], s[3], s[1], s[2]};
}

using PPP = PrePostProcessor;

PPP::InputTensorInfo& PPP::InputTensorInfo::set_element_type(ElementType type) {
  type_ = type;
  return *this;
}
PPP::InputTensorInfo& PPP::InputTensorInfo::set_layout(Layout layout) {
  layout_ = layout;
  return *this;
}
PPP::InputTensorInfo& PPP::InputTensorInfo::set_color_format(ColorFormat color) {
  color_ = color;
  return *this;
}
PPP::InputTensorInfo& PPP::InputTensorInfo::set_spatial_static_shape(int64_t height,
                                                                     int64_t width) {
  if (height <= 0 || width <= 0)
    throw InvalidArgument("set_spatial_static_shape: " + std::to_string(height) + "x" +
                          std::to_string(width) + " is not a size");
  height_ = height;
  width_ = width;
  return *this;
}

PreprocessStep& PPP::PreprocessSteps::add(PreprocessStep::Kind kind) {
  PreprocessStep step;
  step.kind = kind;
  return steps_.emplace_back(step);
}
PPP::PreprocessSteps& PPP::PreprocessSteps::convert_element_type(ElementType type) {
  add(PreprocessStep::Kind::convert_element_type).element_type = type;
  return *this;
}
PPP::PreprocessSteps& PPP::PreprocessSteps::convert_layout(Layout layout) {
  add(PreprocessStep::Kind::convert_layout).layout = layout;
  return *this;
}
PPP::PreprocessSteps& PPP::PreprocessSteps::resize(ResizeAlgorithm algorithm) {
  add(PreprocessStep::Kind::resize).algorithm = algorithm;
  return *this;
}
PPP::PreprocessSteps& PPP::PreprocessSteps::mean(std::vector<float> values) {
  add(PreprocessStep::Kind::mean).values = std::move(values);
  return *this;
}
PPP::PreprocessSteps& PPP::PreprocessSteps::scale(std::vector<float> values) {
  add(PreprocessStep::Kind::scale).values = std::move(values);
  return *this;
}
PPP::PreprocessSteps& PPP::PreprocessSteps::reverse_channels() {
  add(PreprocessStep::Kind::reverse_channels);
  return *this;
}
PPP::PreprocessSteps& PPP::PreprocessSteps::convert_color(ColorFormat color) {
  add(PreprocessStep::Kind::convert_color).color = color;
  return *this;
}

PPP::ModelInfo& PPP::ModelInfo::set_layout(Layout layout) {
  layout_ = layout;
  return *this;
}
PPP::OutputTensorInfo& PPP::OutputTensorInfo::set_element_type(ElementType type) {
  type_ = type;
  return *this;
}
PPP::OutputTensorInfo& PPP::OutputTensorInfo::set_layout(Layout layout) {
  layout_ = layout;
  return *this;
}

PrePostProcessor::PrePostProcessor(std::shared_ptr<const Model> model) : model_(std::move(model)) {
  if (!model_) throw InvalidArgument("PrePostProcessor: model is null");
  inputs_.resize(model_->inputs().size());
  outputs_.resize(model_->outputs().size());
}

PPP::InputInfo& PrePostProcessor::input(size_t index) {
  if (index >= inputs_.size())
    throw InvalidArgument("PrePostProcessor: input index " + std::to_string(index) +
                          " out of range (the model has " + std::to_string(inputs_.size()) + ")");
  if (!inputs_[index]) inputs_[index].emplace();
  return *inputs_[index];
}

PPP::InputInfo& PrePostProcessor::input(const std::string& name) {
  for (size_t i = 0; i < model_->inputs().size(); ++i)
    if (model_->value(model_->inputs()[i]).name == name) return input(i);
  throw InvalidArgument("PrePostProcessor: the model has no input named '" + name + "'");
}

PPP::OutputInfo& PrePostProcessor::output(size_t index) {
  if (index >= outputs_.size())
    throw InvalidArgument("PrePostProcessor: output index " + std::to_string(index) +
                          " out of range (the model has " + std::to_string(outputs_.size()) + ")");
  if (!outputs_[index]) outputs_[index].emplace();
  return *outputs_[index];
}

PPP::OutputInfo& PrePostProcessor::output(const std::string& name) {
  for (size_t i = 0; i < model_->outputs().size(); ++i)
    if (model_->value(model_->outputs()[i]).name == name) return output(i);
  throw InvalidArgument("PrePostProcessor: the model has no output named '" + name + "'");
}

namespace {

// Image geometry as the steps transform it, to validate them and to work out the caller's shape.
struct ImageState {
  ElementType type;
  Layout layout;
  ColorFormat color;
  int64_t n = 1, c = 0, h = -1, w = -1;
};

Shape image_shape(const ImageState& s) {
  return s.layout == Layout::nchw ? Shape{s.n, s.c, s.h, s.w} : Shape{s.n, s.h, s.w, s.c};
}

// What the caller declared for one input (copied out of the builder's classes).
struct InputDeclaration {
  std::optional<ElementType> type_;
  std::optional<Layout> layout_;
  ColorFormat color_ = ColorFormat::rgb;
  int64_t height_ = -1, width_ = -1;
};
struct ModelDeclaration {
  Layout layout_ = Layout::nchw;
};

InputPreprocessing plan_input(const ValueInfo& model_input, const InputDeclaration& t,
                              const ModelDeclaration& m,
                              const std::vector<PreprocessStep>& declared) {
  const std::string where = "preprocessing of input '" + model_input.name + "': ";
  auto fail = [&](const std::string& what) { throw InvalidArgument(where + what); };
  const bool image = model_input.shape.rank() == 4;
  const bool needs_image =
      t.layout_.has_value() || t.height_ > 0 ||
      std::any_of(declared.begin(), declared.end(), [](const PreprocessStep& s) {
        return s.kind != PreprocessStep::Kind::convert_element_type;
      });
  if (needs_image && !image)
    fail("layout, resize, mean, scale and color steps need a 4-D image input; the model's is " +
         model_input.shape.to_string());

  InputPreprocessing plan;
  plan.caller.name = model_input.name;
  plan.caller.type = t.type_.value_or(model_input.type);
  plan.caller_layout = t.layout_.value_or(m.layout_);
  plan.caller_color = t.color_;
  if (!image) {
    plan.caller.shape = model_input.shape;
    for (const PreprocessStep& s : declared) {
      if (!is_convertible(plan.caller.type, s.element_type))
        fail("cannot convert " + std::string(to_string(plan.caller.type)) + " to " +
             std::string(to_string(s.element_type)));
      plan.steps.push_back(s);
    }
    if (!is_convertible(plan.caller.type, model_input.type))
      fail(std::string(to_string(plan.caller.type)) + " cannot become the model's " +
           std::string(to_string(model_input.type)));
    return plan;
  }

  const Shape& ms = model_input.shape;
  ImageState model_state{model_input.type, m.layout_, ColorFormat::rgb};
  model_state.n = ms[0];
  model_state.c = m.layout_ == Layout::nchw ? ms[1] : ms[3];
  model_state.h = m.layout_ == Layout::nchw ? ms[2] : ms[1];
  model_state.w = m.layout_ == Layout::nchw ? ms[3] : ms[2];

  ImageState s{plan.caller.type,
               plan.caller_layout,
               t.color_,
               model_state.n,
               model_state.c,
               t.height_ > 0 ? t.height_ : model_state.h,
               t.width_ > 0 ? t.width_ : model_state.w};
  plan.caller.shape = image_shape(s);
  for (PreprocessStep step : declared) {
    switch (step.kind) {
      case PreprocessStep::Kind::convert_element_type:
        if (!is_convertible(s.type, step.element_type))
          fail("cannot convert " + std::string(to_string(s.type)) + " to " +
               std::string(to_string(step.element_type)));
        s.type = step.element_type;
        break;
      case PreprocessStep::Kind::convert_layout:
        s.layout = step.layout;
        break;
      case PreprocessStep::Kind::resize:
        if (model_state.h < 0 || model_state.w < 0)
          fail("resize needs the model's spatial size, which is dynamic");
        step.height = model_state.h;
        step.width = model_state.w;
        s.h = model_state.h;
        s.w = model_state.w;
        break;
      case PreprocessStep::Kind::mean:
      case PreprocessStep::Kind::scale: {
        const char* name = step.kind == PreprocessStep::Kind::mean ? "mean" : "scale";
        if (!is_floating(s.type))
          fail(std::string(name) + " on " + std::string(to_string(s.type)) +
               " data: add convert_element_type(f32) before it");
        if (step.values.size() != 1 && static_cast<int64_t>(step.values.size()) != s.c)
          fail(std::string(name) + " has " + std::to_string(step.values.size()) + " values for " +
               std::to_string(s.c) + " channels");
        break;
      }
      case PreprocessStep::Kind::convert_color:
        if (step.color == s.color) continue;
        step.kind = PreprocessStep::Kind::reverse_channels;
        [[fallthrough]];
      case PreprocessStep::Kind::reverse_channels:
        s.color = s.color == ColorFormat::rgb ? ColorFormat::bgr : ColorFormat::rgb;
        break;
    }
    plan.steps.push_back(step);
  }
  // Implicit steps: whatever still differs from the model's type and layout.
  if (s.h != model_state.h || s.w != model_state.w)
    fail("the tensor is " + std::to_string(s.h) + "x" + std::to_string(s.w) +
         " but the model takes " + std::to_string(model_state.h) + "x" +
         std::to_string(model_state.w) + ": add resize()");
  if (s.type != model_input.type) {
    if (!is_convertible(s.type, model_input.type))
      fail(std::string(to_string(s.type)) + " cannot become the model's " +
           std::string(to_string(model_input.type)));
    PreprocessStep conv;
    conv.kind = PreprocessStep::Kind::convert_element_type;
    conv.element_type = model_input.type;
    plan.steps.push_back(conv);
  }
  if (s.layout != model_state.layout) {
    PreprocessStep conv;
    conv.kind = PreprocessStep::Kind::convert_layout;
    conv.layout = model_state.layout;
    plan.steps.push_back(conv);
  }
  return plan;
}

}  // namespace

std::shared_ptr<Model> PrePostProcessor::build() {
  auto result = model_->clone();
  auto ppp = std::make_shared<PrePostProcessing>();
  ppp->inputs.resize(inputs_.size());
  ppp->outputs.resize(outputs_.size());
  for (size_t i = 0; i < inputs_.size(); ++i) {
    if (!inputs_[i]) continue;
    const ValueInfo& model_input = model_->value(model_->inputs()[i]);
    const auto& t = inputs_[i]->tensor_;
    InputDeclaration declared{t.type_, t.layout_, t.color_, t.height_, t.width_};
    ppp->inputs[i] = plan_input(model_input, declared, ModelDeclaration{inputs_[i]->model_.layout_},
                                inputs_[i]->steps_.steps_);
  }
  for (size_t i = 0; i < outputs_.size(); ++i) {
    if (!outputs_[i]) continue;
    const ValueInfo& model_output = model_->value(model_->outputs()[i]);
    const auto& t = outputs_[i]->tensor_;
    OutputPostprocessing plan;
    plan.caller.name = model_output.name;
    plan.caller.type = t.type_.value_or(model_output.type);
    if (!is_convertible(model_output.type, plan.caller.type))
      throw InvalidArgument("postprocessing of output '" + model_output.name +
                            "': " + std::string(to_string(model_output.type)) + " cannot become " +
                            std::string(to_string(plan.caller.type)));
    plan.model_layout = outputs_[i]->model_.layout_;
    plan.caller_layout = t.layout_.value_or(plan.model_layout);
    plan.caller.shape = model_output.shape;
    if (plan.caller_layout != plan.model_layout) {
      const Shape& s = model_output.shape;
      if (s.rank() != 4)
        throw InvalidArgument("postprocessing of output '" + model_output.name +
                              "': a layout conversion needs a 4-D output, the model's is " +
                              s.to_string());
      plan.caller.shape = layout_converted_shape(s, plan.model_layout, plan.caller_layout);
    }
    ppp->outputs[i] = plan;
  }
  result->set_pre_post_processing(std::move(ppp));
  return result;
}

}  // namespace troupe
