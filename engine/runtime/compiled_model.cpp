#include "troupe/compiled_model.hpp"

#include "actors/request_state.hpp"
#include "engine/runtime/compiled_model_impl.hpp"
#include "engine/runtime/cpu_plugin.hpp"
#include "serialization/blob/compiled_blob.hpp"
#include "troupe/error.hpp"

namespace troupe {

namespace {
detail::CompiledModelImpl& checked(const std::shared_ptr<detail::CompiledModelImpl>& impl) {
  if (!impl) throw InvalidArgument("use of an empty CompiledModel");
  return *impl;
}
}  // namespace

CompiledModel::CompiledModel(std::shared_ptr<detail::CompiledModelImpl> impl)
    : impl_(std::move(impl)) {}

InferRequest CompiledModel::create_infer_request() {
  auto& impl = checked(impl_);
  auto state = std::make_shared<detail::RequestState>();
  state->inputs.reserve(impl.inputs().size());
  for (const ValueInfo& in : impl.inputs()) {
    // Dynamic dimensions have no size until the caller binds a tensor: allocate them as 1.
    std::vector<int64_t> dims(in.shape.dims());
    for (auto& d : dims) d = d < 0 ? 1 : d;
    state->inputs.emplace_back(in.type, Shape(dims));
  }
  state->outputs.resize(impl.outputs().size());
  state->caller_output.assign(impl.outputs().size(), false);
  for (size_t i = 0; i < impl.outputs().size(); ++i) {
    const ValueInfo& out = impl.outputs()[i];
    if (out.shape.is_static()) state->outputs[i] = Tensor(out.type, out.shape);
  }
  return InferRequest(impl_, std::move(state));
}

const std::vector<ValueInfo>& CompiledModel::inputs() const {
  return checked(impl_).inputs();
}
const std::vector<ValueInfo>& CompiledModel::outputs() const {
  return checked(impl_).outputs();
}

void CompiledModel::set_property(const AnyMap& properties) {
  checked(impl_).set_property(properties);
}

Any CompiledModel::get_property(const std::string& name) const {
  return checked(impl_).get_property(name);
}

std::shared_ptr<const Model> CompiledModel::runtime_model() const {
  return checked(impl_).runtime_model();
}

void CompiledModel::export_model(std::ostream& stream) const {
  const auto& impl = checked(impl_);
  if (impl.is_remote())
    throw InvalidArgument("model '" + impl.name() +
                          "' is remote: export it on the node that compiled it");
  serialization::write_compiled_blob(stream, *impl.graph(), impl.config(),
                                     detail::CpuPlugin::device_name,
                                     detail::CpuPlugin::capabilities());
}

PipelineCounters CompiledModel::counters() const {
  return checked(impl_).context().stats.counters();
}

std::string CompiledModel::stats_report() const {
  return detail::format_summary(checked(impl_).context().stats.summary());
}

}  // namespace troupe
