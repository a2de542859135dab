// MeanVarianceNormalization: shape inference and the reference kernel on values worked out by hand.

#include <gtest/gtest.h>

#include "tests/kernels/reference_op_runner.hpp"
#include "troupe/error.hpp"

namespace troupe::test {
namespace {

TEST(MeanVarianceNormalization, NormalizesEachChannelOverBatchAndSpaceByDefault) {
  // Channel 0 holds 1, 3 (mean 2, deviation 1); channel 1 holds 10, 10 (deviation 0).
  expect_tensor(run1("MeanVarianceNormalization", {input(f32({1, 2, 1, 2}, {1, 3, 10, 10}))}), F32,
                {1, 2, 1, 2}, {-1, 1, 0, 0}, 1e-6);
}

TEST(MeanVarianceNormalization, GivenAxes) {
  // Over the last axis only: rows (0, 2) and (4, 8).
  expect_tensor(run1("MeanVarianceNormalization", {input(f32({2, 2}, {0, 2, 4, 8}))},
                     {{"axes", std::vector<int64_t>{-1}}}),
                F32, {2, 2}, {-1, 1, -1, 1}, 1e-6);
}

TEST(MeanVarianceNormalization, AnAxisOutOfRangeIsNamed) {
  expect_error<ModelError>(
      [] {
        infer("MeanVarianceNormalization", {declared(F32, {2, 2})});
      },
      {"MeanVarianceNormalization node 'node'", "axes entry 2 is out of range for rank 2"});
}

}  // namespace
}  // namespace troupe::test
