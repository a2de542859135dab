// DepthToSpace and SpaceToDepth: shape inference and reference kernels on values worked out by
// hand.

#include <gtest/gtest.h>

#include "tests/kernels/reference_op_runner.hpp"
#include "troupe/error.hpp"

namespace troupe::test {
namespace {

Attributes block2(const std::string& mode = "DCR") {
  return {{"blocksize", int64_t{2}}, {"mode", mode}};
}

// Channels 0..7 of one pixel: two output channels of 2x2 blocks.
Tensor eight_channels() {
  return f32({1, 8, 1, 1}, {0, 1, 2, 3, 4, 5, 6, 7});
}

TEST(DepthToSpace, DcrTakesEachBlockOffsetFromAGroupOfChannels) {
  // DCR: output channel c at block offset k comes from channel k * 2 + c.
  expect_tensor(run1("DepthToSpace", {input(eight_channels())}, block2()), F32, {1, 2, 2, 2},
                {0, 2, 4, 6, 1, 3, 5, 7});
}

TEST(DepthToSpace, CrdKeepsEachOutputChannelsBlockTogether) {
  expect_tensor(run1("DepthToSpace", {input(eight_channels())}, block2("CRD")), F32, {1, 2, 2, 2},
                {0, 1, 2, 3, 4, 5, 6, 7});
}

TEST(SpaceToDepth, InvertsDepthToSpaceDcr) {
  expect_tensor(run1("SpaceToDepth", {input(f32({1, 2, 2, 2}, {0, 2, 4, 6, 1, 3, 5, 7}))},
                     {{"blocksize", int64_t{2}}}),
                F32, {1, 8, 1, 1}, {0, 1, 2, 3, 4, 5, 6, 7});
  // Two pixels per block row: [1, 1, 2, 4] -> [1, 4, 1, 2].
  expect_tensor(run1("SpaceToDepth", {input(f32({1, 1, 2, 4}, {0, 1, 2, 3, 4, 5, 6, 7}))},
                     {{"blocksize", int64_t{2}}}),
                F32, {1, 4, 1, 2}, {0, 2, 1, 3, 4, 6, 5, 7});
}

TEST(DepthToSpace, BadShapesAndAttributesAreNamed) {
  expect_error<ModelError>(
      [] {
        infer("DepthToSpace", {declared(F32, {1, 6, 2, 2})}, block2());
      },
      {"DepthToSpace node 'node'", "channels (6)", "blocksize² (4)"});
  expect_error<ModelError>(
      [] {
        infer("DepthToSpace", {declared(F32, {1, 4, 2, 2})});
      },
      {"blocksize is missing"});
  expect_error<ModelError>(
      [] {
        infer("DepthToSpace", {declared(F32, {1, 4, 2, 2})}, block2("RCD"));
      },
      {"mode is 'RCD'"});
  expect_error<ModelError>(
      [] {
        infer("SpaceToDepth", {declared(F32, {1, 1, 3, 4})}, {{"blocksize", int64_t{2}}});
      },
      {"SpaceToDepth node 'node'", "not a multiple of blocksize 2"});
}

}  // namespace
}  // namespace troupe::test
