#pragma once

// An execution unit for a thread outside CAF's scheduler that runs the actors its sends make ready
// itself, instead of handing each to the scheduler, which wakes a sleeping worker for it.
//
// Why: a message to an idle actor from such a thread was queued to the scheduler with a wake-up
// of a sleeping worker (several microseconds on a virtual machine whose idle vCPU halts, more
// than a small model's whole graph run). Where the sending thread has nothing better to do, it
// runs the actor itself, for a bounded number of actor turns, and hands whatever is still ready
// after that to the scheduler as before. Used by a stream's thread after execute when no other
// request waits for it (download, postprocess), by a thread submitting a request to an otherwise
// empty pipeline that it will only wait for (the scheduler, preprocess, upload: Pipeline::submit)
// and by the completion thread returning a credit (the scheduler).
//
// CAF makes an actor ready through `execution_unit::exec_later` once, when its mailbox goes from
// empty to non-empty, so a job this unit takes is run by nobody else; it is run, released or
// re-queued exactly as a scheduler worker would.

#include <cstddef>
#include <deque>

#include <caf/execution_unit.hpp>
#include <caf/local_actor.hpp>
#include <caf/resumable.hpp>

namespace troupe::actors {

class CallerRunsUnit : public caf::execution_unit {
 public:
  explicit CallerRunsUnit(caf::actor_system& system) : caf::execution_unit(&system) {}
  CallerRunsUnit(const CallerRunsUnit&) = delete;
  CallerRunsUnit& operator=(const CallerRunsUnit&) = delete;
  /// Hands what was not run to the scheduler.
  ~CallerRunsUnit() override;

  void exec_later(caf::resumable* job) override { jobs_.push_back(job); }

  /// Runs the ready jobs, and those they make ready, for at most `turns` actor turns.
  void run(size_t turns);

 private:
  std::deque<caf::resumable*> jobs_;
};

/// Runs `send` (messages `self` sends) with `self`'s sends made through a CallerRunsUnit, then
/// runs what they made ready on this thread for at most `turns` actor turns.
template <class Send>
void send_and_run_here(caf::local_actor* self, size_t turns, Send&& send) {
  CallerRunsUnit unit(self->home_system());
  {
    // The actor's own unit again however `send` ends.
    struct Restore {
      caf::local_actor* self;
      caf::execution_unit* own;
      ~Restore() { self->context(own); }
    } restore{self, self->context()};
    self->context(&unit);
    send();
  }
  unit.run(turns);
}

}  // namespace troupe::actors
