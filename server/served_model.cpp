#include "server/served_model.hpp"

#include "server/serve_error.hpp"
#include "troupe/actor_interface.hpp"

namespace troupe::server {

ServedModel::ServedModel(std::string name, std::string version, std::string platform,
                         CompiledModel compiled)
    : name_(std::move(name)),
      version_(std::move(version)),
      platform_(std::move(platform)),
      compiled_(std::move(compiled)),
      actor_(as_actor(compiled_)) {}

ServedModel::~ServedModel() = default;

ServedModel::Ticket::~Ticket() {
  if (model_) model_->leave();
}

ServedModel::Ticket ServedModel::admit(const std::shared_ptr<ServedModel>& model) {
  std::lock_guard<std::mutex> lock(model->mutex_);
  if (model->draining_)
    throw ServeError(ServeErrc::unavailable, "model '" + model->name_ + "' version " +
                                                 model->version_ + " is being unloaded");
  ++model->pending_;
  return Ticket(model);
}

void ServedModel::leave() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (--pending_ == 0) drained_.notify_all();
}

void ServedModel::drain() {
  std::unique_lock<std::mutex> lock(mutex_);
  draining_ = true;
  drained_.wait(lock, [&] { return pending_.load() == 0; });
}

}  // namespace troupe::server
