// Pre/postprocessing: each image step against hand-computed values, the builder's validation,
// and the steps running inside the preprocess/postprocess stage actors.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "../test_util.hpp"

#include "kernels/preprocess/image_ops.hpp"
#include "troupe/core.hpp"
#include "troupe/error.hpp"
#include "troupe/model_builder.hpp"
#include "troupe/pre_post_processor.hpp"

using namespace troupe;
using troupe::test::error_of;
namespace pp = troupe::kernels::preprocess;
using ::testing::HasSubstr;

namespace {

std::shared_ptr<Model> identity_image_model(int64_t c, int64_t h, int64_t w) {
  ModelBuilder b("image_identity");
  auto x = b.input("image", ElementType::f32, {1, c, h, w});
  b.output(b.op("Identity", {x}, {}, "id"), "out");
  return b.build();
}

}  // namespace

TEST(ImageOps, ConvertLayoutPermutes) {
  // NHWC [1,2,2,3]: pixel (y,x) has channels (10*p, 10*p+1, 10*p+2), p = 2y+x.
  std::vector<float> v;
  for (int p = 0; p < 4; ++p)
    for (int c = 0; c < 3; ++c) v.push_back(static_cast<float>(10 * p + c));
  Tensor nhwc = Tensor::from_vector<float>({1, 2, 2, 3}, v);
  Tensor nchw = pp::convert_layout(nhwc, Layout::nhwc, Layout::nchw);
  EXPECT_EQ(nchw.shape(), (Shape{1, 3, 2, 2}));
  EXPECT_EQ(nchw.to_vector<float>(),
            (std::vector<float>{0, 10, 20, 30, 1, 11, 21, 31, 2, 12, 22, 32}));
  Tensor back = pp::convert_layout(nchw, Layout::nchw, Layout::nhwc);
  EXPECT_EQ(back.to_vector<float>(), v);
}

TEST(ImageOps, ResizeLinearAndNearest) {
  // One channel 4x4 with value 4y+x. Half-pixel linear 4x4 -> 2x2 averages 2x2 blocks.
  std::vector<float> v(16);
  for (int i = 0; i < 16; ++i) v[i] = static_cast<float>(i);
  Tensor img = Tensor::from_vector<float>({1, 1, 4, 4}, v);
  Tensor lin = pp::resize(img, Layout::nchw, 2, 2, ResizeAlgorithm::linear);
  EXPECT_EQ(lin.to_vector<float>(), (std::vector<float>{2.5f, 4.5f, 10.5f, 12.5f}));
  Tensor near = pp::resize(img, Layout::nchw, 2, 2, ResizeAlgorithm::nearest);
  // floor((d + 0.5) * 2) = 1, 3
  EXPECT_EQ(near.to_vector<float>(), (std::vector<float>{5, 7, 13, 15}));
  // Upscale 2x2 -> 4x4 (linear): source coords -0.25 (clamped 0), 0.25, 0.75, 1.25 (clamped 1).
  Tensor small = Tensor::from_vector<float>({1, 1, 2, 2}, {0, 4, 8, 12});
  Tensor up = pp::resize(small, Layout::nchw, 4, 4, ResizeAlgorithm::linear);
  auto u = up.to_vector<float>();
  EXPECT_FLOAT_EQ(u[0], 0.f);
  EXPECT_FLOAT_EQ(u[1], 1.f);  // x = 0.25 between 0 and 4
  EXPECT_FLOAT_EQ(u[2], 3.f);  // x = 0.75
  EXPECT_FLOAT_EQ(u[3], 4.f);
  EXPECT_FLOAT_EQ(u[5], 3.f);  // y = 0.25, x = 0.25: 0.75*(1) + 0.25*(9)
  // u8 stays u8 (rounded).
  Tensor u8 = Tensor::from_vector<uint8_t>({1, 1, 1, 2}, {0, 255});
  Tensor u8r = pp::resize(u8, Layout::nchw, 1, 4, ResizeAlgorithm::linear);
  EXPECT_EQ(u8r.to_vector<uint8_t>(), (std::vector<uint8_t>{0, 64, 191, 255}));
}

TEST(ImageOps, MeanScaleAndReverseChannels) {
  Tensor img = Tensor::from_vector<float>({1, 2, 1, 2}, {10, 20, 30, 50});  // NCHW, 2 channels
  pp::subtract_mean(img, Layout::nchw, {10, 30});
  EXPECT_EQ(img.to_vector<float>(), (std::vector<float>{0, 10, 0, 20}));
  pp::divide_scale(img, Layout::nchw, {5});
  EXPECT_EQ(img.to_vector<float>(), (std::vector<float>{0, 2, 0, 4}));
  Tensor rev = pp::reverse_channels(img, Layout::nchw);
  EXPECT_EQ(rev.to_vector<float>(), (std::vector<float>{0, 4, 0, 2}));
  Tensor nhwc = Tensor::from_vector<float>({1, 1, 1, 3}, {1, 2, 3});
  EXPECT_EQ(pp::reverse_channels(nhwc, Layout::nhwc).to_vector<float>(),
            (std::vector<float>{3, 2, 1}));
  Tensor ints = Tensor::from_vector<uint8_t>({1, 1, 1, 1}, {1});
  EXPECT_THROW(pp::subtract_mean(ints, Layout::nchw, {1}), InvalidArgument);
  EXPECT_THROW(pp::subtract_mean(img, Layout::nchw, {1, 2, 3}), InvalidArgument);
  EXPECT_THROW(pp::divide_scale(img, Layout::nchw, {0}), InvalidArgument);
}

TEST(PrePostProcessor, BuildDerivesCallerTensorAndValidates) {
  auto model = identity_image_model(3, 2, 2);
  {
    PrePostProcessor ppp(model);
    ppp.input("image")
        .tensor()
        .set_element_type(ElementType::u8)
        .set_layout(Layout::nhwc)
        .set_spatial_static_shape(4, 6);
    ppp.input("image").preprocess().convert_element_type().resize(ResizeAlgorithm::linear);
    auto built = ppp.build();
    const auto& plan = *built->pre_post_processing()->inputs[0];
    EXPECT_EQ(plan.caller.shape, (Shape{1, 4, 6, 3}));
    EXPECT_EQ(plan.caller.type, ElementType::u8);
    // convert, resize, then the implicit NHWC -> NCHW.
    ASSERT_EQ(plan.steps.size(), 3u);
    EXPECT_EQ(plan.steps[2].kind, PreprocessStep::Kind::convert_layout);
    EXPECT_EQ(plan.steps[1].height, 2);
  }
  {
    PrePostProcessor ppp(model);
    ppp.input().tensor().set_element_type(ElementType::u8);
    ppp.input().preprocess().mean({1, 2, 3});
    EXPECT_THAT(error_of<InvalidArgument>([&] { ppp.build(); }), HasSubstr("convert_element_type"));
  }
  {
    PrePostProcessor ppp(model);
    ppp.input().tensor().set_spatial_static_shape(8, 8);
    EXPECT_THAT(error_of<InvalidArgument>([&] { ppp.build(); }), HasSubstr("resize"));
  }
  {
    PrePostProcessor ppp(model);
    ppp.input().preprocess().convert_element_type().scale({1, 2});
    EXPECT_THAT(error_of<InvalidArgument>([&] { ppp.build(); }), HasSubstr("3 channels"));
  }
  {
    PrePostProcessor ppp(model);
    EXPECT_THROW(ppp.input("nope"), InvalidArgument);
    EXPECT_THROW(ppp.output(3), InvalidArgument);
  }
}

TEST(PrePostProcessor, StepsRunInTheStageActors) {
  auto model = identity_image_model(3, 2, 2);
  PrePostProcessor ppp(model);
  ppp.input("image")
      .tensor()
      .set_element_type(ElementType::u8)
      .set_layout(Layout::nhwc)
      .set_color_format(ColorFormat::bgr)
      .set_spatial_static_shape(4, 4);
  ppp.input("image")
      .preprocess()
      .convert_element_type(ElementType::f32)
      .convert_color(ColorFormat::rgb)
      .resize(ResizeAlgorithm::linear)
      .mean({1, 2, 3})
      .scale({2, 2, 2});
  ppp.output("out").tensor().set_layout(Layout::nhwc).set_element_type(ElementType::f64);
  Core core;
  auto compiled = core.compile_model(ppp.build());
  EXPECT_EQ(compiled.inputs()[0].shape, (Shape{1, 4, 4, 3}));
  EXPECT_EQ(compiled.inputs()[0].type, ElementType::u8);
  EXPECT_EQ(compiled.outputs()[0].shape, (Shape{1, 2, 2, 3}));
  EXPECT_EQ(compiled.outputs()[0].type, ElementType::f64);

  // BGR NHWC u8 image: pixel (y,x) = (B, G, R) = (4y+x, 100+4y+x, 200+4y+x) -> after the
  // 2x2-block average and BGR->RGB, block (0,0) has B=2.5, G=102.5, R=202.5.
  std::vector<uint8_t> pixels;
  for (int y = 0; y < 4; ++y)
    for (int x = 0; x < 4; ++x)
      for (int c = 0; c < 3; ++c) pixels.push_back(static_cast<uint8_t>(100 * c + 4 * y + x));
  auto request = compiled.create_infer_request();
  request.set_tensor("image", Tensor::from_vector<uint8_t>({1, 4, 4, 3}, pixels));
  request.infer();
  Tensor out = request.get_tensor("out");
  ASSERT_EQ(out.element_type(), ElementType::f64);
  ASSERT_EQ(out.shape(), (Shape{1, 2, 2, 3}));
  auto v = out.to_vector<double>();
  // NHWC output, pixel (0,0): RGB = ((202.5-1)/2, (102.5-2)/2, (2.5-3)/2)
  EXPECT_DOUBLE_EQ(v[0], (202.5 - 1) / 2);
  EXPECT_DOUBLE_EQ(v[1], (102.5 - 2) / 2);
  EXPECT_DOUBLE_EQ(v[2], (2.5 - 3) / 2);
  // pixel (1,1): block rows 2-3, cols 2-3: B average = 4*2.5+2.5 = 12.5
  EXPECT_DOUBLE_EQ(v[9], (212.5 - 1) / 2);
  EXPECT_DOUBLE_EQ(v[11], (12.5 - 3) / 2);
  // The preprocess stage did the work: it took measurable time relative to nothing.
  auto info = request.profiling_info();
  EXPECT_EQ(info[0].name, stage_names[0]);
  // A tensor in the model's original form is now the wrong input.
  EXPECT_THROW(request.set_tensor("image", Tensor(ElementType::f32, {1, 3, 2, 2})), TensorMismatch);
}
