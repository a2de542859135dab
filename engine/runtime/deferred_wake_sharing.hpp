#pragma once

// A CAF scheduler policy for troupe's own actor system: CAF's work sharing (one central queue of
// actors ready to run, idle workers asleep on a condition variable), except that a worker does not
// wake another worker for the first job it makes while it runs an actor, since it takes that job
// itself as soon as the actor's turn ends.
//
// Why: a request crosses five to seven actors, each hop a message that makes the receiver ready.
// CAF's work sharing wakes a sleeping worker for every one of them, so on a machine with idle cores
// nearly every hop moves to another thread and pays a wake-up (a futex call and, on a virtual
// machine, the hypervisor resuming a halted vCPU: tens of microseconds, more than a small model's
// graph run). With this policy a request follows one worker along the pipeline while the other
// workers sleep, and a second job made in the same turn (a batch fanned out to two streams, an
// actor with more messages waiting) still wakes a sleeper, so stages keep overlapping under load.
// Polling before sleeping was measured too and lost: on two cores the poller takes the core that
// execute's second OpenMP thread or the caller needs.
//
// The cost: a job deferred this way waits for the rest of its maker's turn, so an actor must not
// block after it sends (troupe's stages never do; CAF forbids it anyway).
// `scheduler.max-throughput` bounds a turn to a few messages, so an actor draining a long mailbox
// does not hold it either. And sleepers look at the queue every `recheck` even unwoken: an
// application's actor on this system that does block after a send (waiting for the very actor it
// sent to) costs that long, not a hang; an idle worker wakes 100 times a second for it.

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <mutex>

#include <caf/policy/unprofiled.hpp>
#include <caf/resumable.hpp>

namespace troupe::detail {

class DeferredWakeSharing : public caf::policy::unprofiled {
 public:
  static constexpr std::chrono::milliseconds recheck{10};

  struct coordinator_data {
    explicit coordinator_data(caf::scheduler::abstract_coordinator*) {}
    std::mutex lock;
    std::condition_variable cv;
    std::deque<caf::resumable*> queue;  // guarded by lock
    size_t sleepers = 0;                // workers waiting on cv; guarded by lock
  };

  struct worker_data {
    explicit worker_data(caf::scheduler::abstract_coordinator*) {}
    bool deferred = false;  // this turn has queued a job without waking anyone
  };

  // From outside the workers (another thread, a detached actor, the clock): wake a sleeper.
  template <class Coordinator>
  void central_enqueue(Coordinator* self, caf::resumable* job) {
    push(d(self), job, Wake::always);
  }

  template <class Worker>
  void external_enqueue(Worker* self, caf::resumable* job) {
    push(d(self->parent()), job, Wake::always);
  }

  // From an actor running on this worker.
  template <class Worker>
  void internal_enqueue(Worker* self, caf::resumable* job) {
    bool& deferred = d(self).deferred;
    if (push(d(self->parent()), job, deferred ? Wake::always : Wake::unless_first)) deferred = true;
  }

  // An actor whose turn ended with messages left: alone in the queue, this worker resumes it
  // next; behind other jobs, a sleeper may take one of them.
  template <class Worker>
  void resume_job_later(Worker* self, caf::resumable* job) {
    push(d(self->parent()), job, Wake::unless_first);
  }

  template <class Worker>
  void after_resume(Worker* self, caf::resumable*) {
    d(self).deferred = false;
  }

  template <class Worker>
  caf::resumable* dequeue(Worker* self) {
    auto& data = d(self->parent());
    std::unique_lock<std::mutex> guard(data.lock);
    while (data.queue.empty()) {
      ++data.sleepers;
      data.cv.wait_for(guard, recheck);
      --data.sleepers;
    }
    caf::resumable* job = data.queue.front();
    data.queue.pop_front();
    return job;
  }

  template <class Worker, class UnaryFunction>
  void foreach_resumable(Worker*, UnaryFunction) {}

  template <class Coordinator, class UnaryFunction>
  void foreach_central_resumable(Coordinator* self, UnaryFunction f) {
    auto& data = d(self);
    std::unique_lock<std::mutex> guard(data.lock);
    while (!data.queue.empty()) {
      caf::resumable* job = data.queue.front();
      data.queue.pop_front();
      f(job);
    }
  }

 private:
  enum class Wake { always, unless_first };

  // Queues `job`; returns true when it was not announced (unless_first and the queue was empty).
  // A worker counts itself a sleeper under the lock before it waits, so a sleeper counted here is
  // asleep or about to re-check the queue: no wake-up is lost.
  static bool push(coordinator_data& data, caf::resumable* job, Wake wake) {
    std::unique_lock<std::mutex> guard(data.lock);
    const bool first = data.queue.empty();
    data.queue.push_back(job);
    if (wake == Wake::unless_first && first) return true;
    if (data.sleepers > 0) data.cv.notify_one();
    return false;
  }
};

}  // namespace troupe::detail
