#include "actors/caller_runs_unit.hpp"

#include <caf/actor_system.hpp>
#include <caf/scheduler/abstract_coordinator.hpp>

namespace troupe::actors {

CallerRunsUnit::~CallerRunsUnit() {
  for (caf::resumable* job : jobs_) system().scheduler().enqueue(job);
}

void CallerRunsUnit::run(size_t turns) {
  const size_t max_throughput = system().scheduler().max_throughput();
  while (!jobs_.empty() && turns > 0) {
    caf::resumable* job = jobs_.front();
    jobs_.pop_front();
    --turns;
    switch (job->resume(this, max_throughput)) {
      case caf::resumable::resume_later:
        // Messages left after its turn: the scheduler takes it, keeping the reference.
        system().scheduler().enqueue(job);
        break;
      case caf::resumable::done:
      case caf::resumable::awaiting_message:
        intrusive_ptr_release(job);
        break;
      case caf::resumable::shutdown_execution_unit:
        // Only the scheduler's own shutdown job answers this, and it never reaches this unit.
        system().scheduler().enqueue(job);
        break;
    }
  }
}

}  // namespace troupe::actors
