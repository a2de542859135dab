// The scheduler's policy (actors/batch_queue.hpp) on a fake clock: batch delay, preferred sizes,
// priorities, both timeout actions, queue-full refusal, shape keys and live policy changes.

#include <gmock/gmock.h>

#include "actors/batch_queue.hpp"
#include "troupe/error.hpp"

using namespace troupe;
using namespace troupe::actors;
using ::testing::ElementsAre;
using ::testing::IsEmpty;

namespace {

constexpr int64_t us = 1000;  // the queue's clock is in ns

detail::SchedulingPolicy batching_policy(int max, int64_t delay_us) {
  detail::SchedulingPolicy p;
  p.max_batch_size = max;
  p.max_queue_delay_us = delay_us;
  return p;
}

QueuedRequest request(uint64_t id, int64_t at_ns, int level = 0, uint64_t key = 7,
                      int64_t deadline_ns = 0) {
  QueuedRequest r;
  r.id = id;
  r.arrival_ns = at_ns;
  r.level = level;
  r.shape_key = key;
  r.deadline_ns = deadline_ns;
  return r;
}

}  // namespace

TEST(BatchQueue, WithoutBatchingItIsFifoOneAtATime) {
  BatchQueue q{detail::SchedulingPolicy{}};
  for (uint64_t id = 1; id <= 3; ++id) ASSERT_TRUE(q.push(request(id, 0)));
  EXPECT_THAT(q.next_batch(0), ElementsAre(1));
  EXPECT_THAT(q.next_batch(0), ElementsAre(2));
  EXPECT_THAT(q.next_batch(0), ElementsAre(3));
  EXPECT_THAT(q.next_batch(0), IsEmpty());
  EXPECT_EQ(q.next_event(true), 0);
}

TEST(BatchQueue, TheOldestWaitsAtMostTheDelayForItsBatchToFill) {
  BatchQueue q{batching_policy(4, 100)};
  q.push(request(1, 0));
  q.push(request(2, 10 * us));
  EXPECT_THAT(q.next_batch(50 * us), IsEmpty());
  EXPECT_EQ(q.next_event(true), 100 * us);  // the first request's delay ends
  EXPECT_EQ(q.next_event(false), 0);        // no credit: only timeouts would wake it
  EXPECT_THAT(q.next_batch(99 * us), IsEmpty());
  EXPECT_THAT(q.next_batch(100 * us), ElementsAre(1, 2));
  EXPECT_EQ(q.size(), 0u);
}

TEST(BatchQueue, AFullBatchLeavesAtOnceAndTheRestWaitsAgain) {
  BatchQueue q{batching_policy(3, 1000)};
  for (uint64_t id = 1; id <= 5; ++id) q.push(request(id, static_cast<int64_t>(id) * us));
  EXPECT_THAT(q.next_batch(6 * us), ElementsAre(1, 2, 3));
  EXPECT_THAT(q.next_batch(6 * us), IsEmpty());  // 4 and 5: not full, delay not over
  EXPECT_EQ(q.next_event(true), 1004 * us);
  EXPECT_THAT(q.next_batch(1004 * us), ElementsAre(4, 5));
}

TEST(BatchQueue, ZeroDelayTakesWhatIsWaiting) {
  BatchQueue q{batching_policy(8, 0)};
  q.push(request(1, 0));
  q.push(request(2, 0));
  EXPECT_THAT(q.next_batch(0), ElementsAre(1, 2));
}

TEST(BatchQueue, TheLargestPreferredSizeThatCanFormLeavesBeforeTheDelay) {
  auto p = batching_policy(8, 1000);
  p.preferred_batch_sizes = {2, 4};
  BatchQueue q{p};
  for (uint64_t id = 1; id <= 5; ++id) q.push(request(id, 0));
  EXPECT_THAT(q.next_batch(1 * us), ElementsAre(1, 2, 3, 4));
  EXPECT_THAT(q.next_batch(1 * us), IsEmpty());  // one left: below every preferred size
  EXPECT_THAT(q.next_batch(1000 * us), ElementsAre(5));
}

TEST(BatchQueue, OnlyRequestsWithTheFirstOnesShapesJoinItsBatch) {
  BatchQueue q{batching_policy(4, 0)};
  q.push(request(1, 0, 0, /*key=*/1));
  q.push(request(2, 0, 0, /*key=*/2));
  q.push(request(3, 0, 0, /*key=*/1));
  EXPECT_THAT(q.next_batch(0), ElementsAre(1, 3));
  EXPECT_THAT(q.next_batch(0), ElementsAre(2));
}

TEST(BatchQueue, HigherPriorityRunsFirstAndLowerOnesAreNotStarvedWhenItIsIdle) {
  auto p = batching_policy(2, 0);
  p.priority_levels = 3;
  BatchQueue q{p};
  q.push(request(1, 0, /*level=*/2));
  q.push(request(2, 1, /*level=*/1));
  q.push(request(3, 2, /*level=*/0));
  q.push(request(4, 3, /*level=*/0));
  q.push(request(5, 4, /*level=*/2));
  EXPECT_THAT(q.next_batch(10), ElementsAre(3, 4));
  // The batch is led by the highest waiting request and filled in priority order.
  EXPECT_THAT(q.next_batch(10), ElementsAre(2, 1));
  EXPECT_THAT(q.next_batch(10), ElementsAre(5));
}

TEST(BatchQueue, StrictPrioritiesLetASteadyHighLevelStarveALowOne) {
  // Triton's semantics, the default: as long as level 1 has work, level 2 waits.
  auto p = batching_policy(1, 0);
  p.priority_levels = 2;
  BatchQueue q{p};
  q.push(request(1, 0, /*level=*/1));
  for (uint64_t id = 2; id < 100; ++id) {
    q.push(request(id, static_cast<int64_t>(id) * 1000 * us, /*level=*/0));
    EXPECT_THAT(q.next_batch(static_cast<int64_t>(id) * 1000 * us), ElementsAre(id));
  }
  EXPECT_EQ(q.size(1), 1u);
}

TEST(BatchQueue, AgingMovesAWaitingRequestUpALevelPerPeriodAmongThatLevelsByArrival) {
  auto p = batching_policy(1, 0);
  p.priority_levels = 3;
  p.priority_aging_us = 100;
  BatchQueue q{p};
  q.push(request(1, 0, /*level=*/2));         // lowest, oldest
  q.push(request(2, 50 * us, /*level=*/1));   // middle
  q.push(request(3, 60 * us, /*level=*/0));   // highest
  q.push(request(4, 150 * us, /*level=*/0));  // highest, newer than 1's first period
  // At 99 us nobody has aged: strict order.
  EXPECT_THAT(q.next_batch(99 * us), ElementsAre(3));
  // At 160 us request 1 (waited 1 period) competes at level 2 and is older than request 2, and
  // request 2 (waited 110 us) competes at level 1, older than request 4.
  EXPECT_THAT(q.next_batch(160 * us), ElementsAre(2));
  EXPECT_THAT(q.next_batch(160 * us), ElementsAre(4));
  EXPECT_THAT(q.next_batch(160 * us), ElementsAre(1));
  // Two periods take a lowest request to the top, ahead of level-1 requests that came later.
  q.push(request(5, 1000 * us, /*level=*/2));
  q.push(request(6, 1100 * us, /*level=*/0));
  q.push(request(7, 1150 * us, /*level=*/0));
  EXPECT_THAT(q.next_batch(1150 * us), ElementsAre(6));
  EXPECT_THAT(q.next_batch(1200 * us), ElementsAre(5));
  EXPECT_THAT(q.next_batch(1200 * us), ElementsAre(7));
  EXPECT_EQ(q.size(), 0u);
}

TEST(BatchQueue, AgingBoundsTheWaitOfALowLevelUnderASteadyHighOne) {
  // One request runs per 100 us; level 1 always has one waiting. With aging of 1 ms, the level-2
  // request runs within two periods (when it has aged to level 1 and is the oldest there).
  auto p = batching_policy(1, 0);
  p.priority_levels = 2;
  p.priority_aging_us = 1000;
  BatchQueue q{p};
  q.push(request(1000, 0, /*level=*/1));
  int64_t ran_at = -1;
  for (uint64_t id = 1; id < 100 && ran_at < 0; ++id) {
    const int64_t now = static_cast<int64_t>(id) * 100 * us;
    q.push(request(id, now, /*level=*/0));
    for (uint64_t ran : q.next_batch(now))
      if (ran == 1000) ran_at = now;
  }
  EXPECT_GT(ran_at, 0);
  EXPECT_LE(ran_at, 2000 * us);
}

TEST(BatchQueue, APromotedRequestKeepsItsOwnLevelsTimeoutAction) {
  auto p = batching_policy(1, 0);
  p.priority_levels = 2;
  p.priority_aging_us = 10;
  p.priority_queue_policy[2] = {{"timeout_action", Any(std::string("DELAY"))}};
  BatchQueue q{p};
  q.push(request(1, 0, /*level=*/1, 7, /*deadline=*/100 * us));
  q.push(request(2, 0, /*level=*/0, 7, /*deadline=*/100 * us));
  q.push(request(3, 5 * us, /*level=*/0));
  EXPECT_THAT(q.next_batch(20 * us), ElementsAre(2));  // 1 now waits at level 1, behind 2
  // Level 1 rejects on timeout, but request 1 asked for level 2, which delays: it stays.
  EXPECT_THAT(q.expire(100 * us), IsEmpty());
  EXPECT_EQ(q.size(), 2u);
}

TEST(BatchQueue, AFullLevelRefusesWhileOthersStillAccept) {
  auto p = batching_policy(1, 0);
  p.priority_levels = 2;
  p.queue.max_queue_size = 2;
  BatchQueue q{p};
  EXPECT_TRUE(q.push(request(1, 0, 1)));
  EXPECT_TRUE(q.push(request(2, 0, 1)));
  EXPECT_FALSE(q.push(request(3, 0, 1)));
  EXPECT_EQ(q.size(1), 2u);
  EXPECT_TRUE(q.push(request(4, 0, 0)));
  q.next_batch(0);  // 4
  q.next_batch(0);  // 1: level 1 has room again
  EXPECT_TRUE(q.push(request(5, 0, 1)));
}

TEST(BatchQueue, RejectTimeoutsLeaveTheQueueAtTheirDeadline) {
  auto p = batching_policy(4, 1000);
  p.queue.timeout_action = detail::TimeoutAction::reject;
  BatchQueue q{p};
  q.push(request(1, 0, 0, 7, /*deadline=*/50 * us));
  q.push(request(2, 0, 0, 7, /*deadline=*/0));
  EXPECT_EQ(q.next_event(false), 50 * us);
  EXPECT_THAT(q.expire(49 * us), IsEmpty());
  EXPECT_THAT(q.expire(50 * us), ElementsAre(1));
  EXPECT_EQ(q.size(), 1u);
  EXPECT_THAT(q.next_batch(1000 * us), ElementsAre(2));
}

TEST(BatchQueue, DelayedTimeoutsGoBehindTheOthersOfTheirLevel) {
  auto p = batching_policy(1, 0);
  p.priority_levels = 2;
  p.queue.timeout_action = detail::TimeoutAction::delay;
  BatchQueue q{p};
  q.push(request(1, 0, 0, 7, /*deadline=*/10 * us));
  q.push(request(2, 1, 0));
  q.push(request(3, 2, 1));
  EXPECT_THAT(q.expire(10 * us), IsEmpty());  // DELAY: nobody is refused
  EXPECT_EQ(q.size(), 3u);
  EXPECT_THAT(q.next_batch(10 * us), ElementsAre(2));
  EXPECT_THAT(q.next_batch(10 * us), ElementsAre(1));  // after its level's others
  EXPECT_THAT(q.next_batch(10 * us), ElementsAre(3));
  EXPECT_EQ(q.next_event(true), 0);
}

TEST(BatchQueue, APolicyChangeAppliesToTheNextDecisionAndKeepsEveryRequest) {
  auto p = batching_policy(1, 0);
  p.priority_levels = 3;
  BatchQueue q{p};
  q.push(request(1, 0, 2));
  q.push(request(2, 0, 1));
  q.push(request(3, 0, 2));
  auto bigger = batching_policy(4, 0);  // one level: levels beyond it join the lowest, in order
  q.set_policy(bigger);
  EXPECT_EQ(q.size(), 3u);
  EXPECT_THAT(q.next_batch(0), ElementsAre(2, 1, 3));
}

TEST(BatchQueue, TakeAllEmptiesEveryLevel) {
  auto p = batching_policy(2, 1000);
  p.priority_levels = 2;
  BatchQueue q{p};
  q.push(request(1, 0, 0));
  q.push(request(2, 0, 1));
  EXPECT_THAT(q.take_all(), ElementsAre(1, 2));
  EXPECT_EQ(q.size(), 0u);
  EXPECT_EQ(q.next_event(true), 0);
}

TEST(SchedulingPolicy, PropertiesAreValidatedAndNamed) {
  {
    detail::SchedulingPolicy p;
    detail::apply_scheduling_property(p, "priority_aging_microseconds", Any(int64_t{5000}));
    EXPECT_EQ(p.priority_aging_us, 5000);
    EXPECT_FALSE(p.is_default());
    EXPECT_EQ(detail::scheduling_properties(p).at("priority_aging_microseconds").as_int(), 5000);
  }
  detail::SchedulingPolicy p;
  detail::apply_scheduling_property(p, "preferred_batch_size", Any("8, 4"));
  EXPECT_THAT(p.preferred_batch_sizes, ElementsAre(4, 8));
  detail::apply_scheduling_property(p, "preferred_batch_size",
                                    Any(std::vector<std::string>{"2", "16"}));
  EXPECT_THAT(p.preferred_batch_sizes, ElementsAre(2, 16));
  detail::apply_scheduling_property(p, "timeout_action", Any("delay"));
  EXPECT_EQ(p.queue.timeout_action, detail::TimeoutAction::delay);
  auto fails = [&](const char* key, Any value, const char* words) {
    try {
      detail::apply_scheduling_property(p, key, value);
      ADD_FAILURE() << key << " accepted";
    } catch (const InvalidArgument& e) {
      EXPECT_THAT(e.what(), ::testing::HasSubstr(key));
      EXPECT_THAT(e.what(), ::testing::HasSubstr(words));
    }
  };
  fails("max_batch_size", Any(0), "1..256");
  fails("timeout_action", Any("DROP"), "REJECT, DELAY");
  fails("max_queue_delay_microseconds", Any(-1), "allowed");
  fails("preferred_batch_size", Any("4 x"), "preferred_batch_size");
  fails("priority_aging_microseconds", Any(-1), "allowed");
  p.max_batch_size = 8;
  EXPECT_THROW(detail::validate(p), InvalidArgument);  // preferred 16 > max 8
  p.preferred_batch_sizes = {4};
  p.priority_levels = 2;
  p.default_priority_level = 3;
  EXPECT_THROW(detail::validate(p), InvalidArgument);
  p.default_priority_level = 2;
  detail::validate(p);
  EXPECT_EQ(p.level_of(0), 1);  // the default level, 0-based
  EXPECT_EQ(p.level_of(1), 0);
  EXPECT_THROW(p.level_of(3), InvalidArgument);
}

TEST(SchedulingPolicy, ARequestMayOnlyShortenItsTimeoutWhenAllowed) {
  detail::SchedulingPolicy p;
  p.queue.default_timeout_us = 500;
  EXPECT_EQ(p.timeout_of(0, 0), 500);
  EXPECT_EQ(p.timeout_of(0, 100), 500);  // not allowed: the default holds
  p.queue.allow_timeout_override = true;
  EXPECT_EQ(p.timeout_of(0, 100), 100);
  EXPECT_EQ(p.timeout_of(0, 900), 500);  // never longer than the default
  p.queue.default_timeout_us = 0;
  EXPECT_EQ(p.timeout_of(0, 900), 900);
}

TEST(SchedulingPolicy, EachPriorityLevelMayHaveItsOwnQueuePolicy) {
  detail::SchedulingPolicy p;
  p.priority_levels = 3;
  // Level 2 bounded and delayed, level 3 with its own timeout; the fields a level leaves out are
  // the default policy's, whenever that is set (here after the levels).
  detail::apply_scheduling_property(p, "priority_queue_policy",
                                    Any(R"({"2": {"max_queue_size": 1, "timeout_action": "DELAY"},
              "3": {"default_timeout_microseconds": 40, "allow_timeout_override": true}})"));
  detail::apply_scheduling_property(p, "default_timeout_microseconds", Any(500));
  detail::validate(p);
  EXPECT_EQ(p.queue_of(0).max_queue_size, 0);
  EXPECT_EQ(p.queue_of(0).default_timeout_us, 500);
  EXPECT_EQ(p.queue_of(1).max_queue_size, 1);
  EXPECT_EQ(p.queue_of(1).timeout_action, detail::TimeoutAction::delay);
  EXPECT_EQ(p.queue_of(1).default_timeout_us, 500);
  EXPECT_EQ(p.queue_of(2).default_timeout_us, 40);
  EXPECT_EQ(p.timeout_of(2, 10), 10);   // level 3 allows a shorter one of its own
  EXPECT_EQ(p.timeout_of(0, 10), 500);  // the default policy does not
  EXPECT_FALSE(p.is_default());
  // Reported in full, and what is reported reads back the same.
  const std::string text = detail::scheduling_properties(p).at("priority_queue_policy").as_string();
  EXPECT_THAT(text, ::testing::HasSubstr(R"("2":{"allow_timeout_override":false,)"));
  detail::SchedulingPolicy again = p;
  detail::apply_scheduling_property(again, "priority_queue_policy", Any(text));
  EXPECT_EQ(again.queue_of(1).timeout_action, detail::TimeoutAction::delay);
  EXPECT_EQ(again.queue_of(2).default_timeout_us, 40);

  auto fails = [&](const std::string& value, const std::vector<std::string>& words) {
    detail::SchedulingPolicy q = p;
    try {
      detail::apply_scheduling_property(q, "priority_queue_policy", Any(value));
      detail::validate(q);
      ADD_FAILURE() << value << " accepted";
    } catch (const InvalidArgument& e) {
      EXPECT_THAT(e.what(), ::testing::HasSubstr("priority_queue_policy")) << value;
      for (const std::string& w : words) EXPECT_THAT(e.what(), ::testing::HasSubstr(w)) << value;
    }
  };
  fails(R"({"2": {"max_queue_length": 1}})", {"priority level 2", "max_queue_length"});
  fails(R"({"2": {"timeout_action": "DROP"}})", {"priority level 2", "REJECT, DELAY"});
  fails(R"({"4": {"max_queue_size": 1}})", {"priority level 4", "1..3"});
  fails(R"({"two": {}})", {"priority level"});
  fails(R"([1, 2])", {"JSON object"});
  detail::apply_scheduling_property(p, "priority_queue_policy", Any(""));  // cleared
  EXPECT_EQ(p.queue_of(1).max_queue_size, 0);
}

TEST(BatchQueue, EachLevelRefusesAndTimesOutByItsOwnPolicy) {
  detail::SchedulingPolicy p;
  p.priority_levels = 2;
  p.queue.timeout_action = detail::TimeoutAction::reject;
  detail::apply_scheduling_property(
      p, "priority_queue_policy",
      Any(R"({"2": {"max_queue_size": 1, "timeout_action": "DELAY"}})"));
  BatchQueue q(p);
  EXPECT_TRUE(q.push(request(1, 0, 0, 7, 100 * us)));
  EXPECT_TRUE(q.push(request(2, 0, 0, 7, 100 * us)));  // level 1 is unbounded
  EXPECT_TRUE(q.push(request(3, 0, 1, 7, 100 * us)));
  EXPECT_FALSE(q.push(request(4, 0, 1, 7, 100 * us)));  // level 2 holds one
  // At the deadline level 1's requests are rejected, level 2's moves behind and stays.
  EXPECT_THAT(q.expire(200 * us), ElementsAre(1, 2));
  EXPECT_EQ(q.size(), 1u);
  EXPECT_THAT(q.next_batch(200 * us), ElementsAre(3));
}

TEST(BatchQueue, ALimitBelowTheMaximumCapsTheBatchAndCountsAsFull) {
  BatchQueue q{batching_policy(8, 1000)};
  for (uint64_t id = 1; id <= 5; ++id) ASSERT_TRUE(q.push(request(id, 0)));
  // Under a limit of 2 a batch of two is full: it leaves at once, not after the 1 ms delay.
  EXPECT_THAT(q.next_batch(1 * us, 2), ElementsAre(1, 2));
  EXPECT_THAT(q.next_batch(1 * us, 2), ElementsAre(3, 4));
  EXPECT_THAT(q.next_batch(1 * us, 2), IsEmpty());  // 5 waits for a partner or the delay
  EXPECT_THAT(q.next_batch(1000 * us, 2), ElementsAre(5));
  // A limit above max_batch_size is max_batch_size.
  for (uint64_t id = 6; id <= 15; ++id) ASSERT_TRUE(q.push(request(id, 2000 * us)));
  EXPECT_THAT(q.next_batch(2000 * us, 64), ElementsAre(6, 7, 8, 9, 10, 11, 12, 13));
}

TEST(SchedulingPolicy, TheTopLevelIsLevelOneOfTwoOrMoreAndTheDefaultWhenItIsOne) {
  detail::SchedulingPolicy p;
  EXPECT_FALSE(p.is_top_level(1));  // one level: nothing to overtake
  p.priority_levels = 3;
  EXPECT_TRUE(p.is_top_level(1));
  EXPECT_FALSE(p.is_top_level(2));
  EXPECT_FALSE(p.is_top_level(0));  // the default: the lowest level
  EXPECT_FALSE(p.is_top_level(4));  // out of range (refused), no throw
  EXPECT_FALSE(p.is_top_level(-1));
  p.default_priority_level = 1;
  EXPECT_TRUE(p.is_top_level(0));
}

TEST(BatchQueue, TheTopLevelsOwnBatchTakesOnlyRequestsThatAskedForItAndDoesNotWait) {
  detail::SchedulingPolicy p =
      batching_policy(4, 1'000'000);  // a partial batch would wait a second
  p.priority_levels = 2;
  p.priority_aging_us = 100;
  BatchQueue q{p};
  ASSERT_TRUE(q.push(request(1, 0, 1)));
  ASSERT_TRUE(q.push(request(2, 0, 0, 7)));
  ASSERT_TRUE(q.push(request(3, 0, 0, 8)));  // other shapes: not in 2's batch
  ASSERT_TRUE(q.push(request(4, 0, 0, 7)));
  ASSERT_TRUE(q.push(request(5, 0, 1)));
  // Request 1, aged into the top level's queue, still asked for the lower level: left out.
  EXPECT_THAT(q.next_batch(1'000 * us, 1), ElementsAre(2));
  ASSERT_TRUE(q.push(request(6, 1'000 * us, 0, 7)));
  EXPECT_THAT(q.next_top_level_batch(), ElementsAre(3));  // the first; 4 and 6 have other shapes
  EXPECT_THAT(q.next_top_level_batch(1), ElementsAre(4));
  EXPECT_THAT(q.next_top_level_batch(), ElementsAre(6));
  EXPECT_THAT(q.next_top_level_batch(), IsEmpty());
  EXPECT_EQ(q.size(), 2u);
  EXPECT_THAT(q.next_batch(2'000 * us), IsEmpty());  // the ordinary batch waits for its delay
  EXPECT_THAT(q.next_batch(1'000'000 * us), ElementsAre(1, 5));
}

TEST(BatchQueue, ATopLevelStreamNeedsTwoPriorityLevels) {
  detail::SchedulingPolicy p;
  detail::apply_scheduling_property(p, "top_priority_stream", Any("YES"));
  try {
    detail::validate(p);
    ADD_FAILURE() << "top_priority_stream accepted without priority levels";
  } catch (const InvalidArgument& e) {
    EXPECT_THAT(e.what(), ::testing::HasSubstr("top_priority_stream"));
  }
  p.priority_levels = 2;
  detail::validate(p);
  EXPECT_TRUE(detail::scheduling_properties(p).at("top_priority_stream").as_bool());
}
