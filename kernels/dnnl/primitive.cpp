#include "kernels/dnnl/primitive.hpp"

#include <cstdlib>
#include <memory>
#include <new>
#include <stdexcept>
#include <string>

namespace troupe::kernels::onednn {

namespace {

constexpr size_t scratchpad_alignment = 64;

struct FreeDeleter {
  void operator()(void* p) const { std::free(p); }
};

}  // namespace

dnnl::primitive_attr primitive_attributes(const dnnl::post_ops& ops) {
  dnnl::primitive_attr attr;
  attr.set_post_ops(ops);
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  return attr;
}

Primitive::Primitive(dnnl::primitive primitive, const dnnl::primitive_desc_base& pd)
    : primitive_(std::move(primitive)) {
  if (pd.get_primitive_attr().get_scratchpad_mode() != dnnl::scratchpad_mode::user)
    throw std::logic_error(std::string("oneDNN primitive ") + pd.impl_info_str() +
                           " was not created with primitive_attributes()");
  const dnnl::memory::desc scratchpad = pd.scratchpad_desc();
  scratchpad_bytes_ = scratchpad.get_size();
  if (scratchpad_bytes_ > 0)
    scratchpad_ = dnnl::memory(scratchpad, pd.get_engine(), DNNL_MEMORY_NONE);
}

void Primitive::execute(const dnnl::stream& stream, std::unordered_map<int, dnnl::memory>& args) {
  if (scratchpad_bytes_ > 0) {
    scratchpad_.set_data_handle(thread_scratchpad(scratchpad_bytes_));
    args[DNNL_ARG_SCRATCHPAD] = scratchpad_;
  }
  primitive_.execute(stream, args);
}

void* thread_scratchpad(size_t bytes) {
  thread_local std::unique_ptr<void, FreeDeleter> buffer;
  thread_local size_t capacity = 0;
  if (bytes > capacity) {
    const size_t rounded =
        (bytes + scratchpad_alignment - 1) / scratchpad_alignment * scratchpad_alignment;
    buffer.reset();  // free first: the old contents are never needed
    buffer.reset(std::aligned_alloc(scratchpad_alignment, rounded));
    if (!buffer) {
      capacity = 0;
      throw std::bad_alloc();
    }
    capacity = rounded;
  }
  return buffer.get();
}

}  // namespace troupe::kernels::onednn
