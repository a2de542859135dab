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

void* thread_buffer(int index, size_t bytes) {
  struct Buffer {
    std::unique_ptr<void, FreeDeleter> data;
    size_t capacity = 0;
  };
  thread_local Buffer buffers[thread_buffer_count];
  if (index < 0 || index >= thread_buffer_count)
    throw std::logic_error("thread buffer " + std::to_string(index) + " out of range");
  Buffer& b = buffers[index];
  if (bytes > b.capacity) {
    const size_t rounded =
        (bytes + scratchpad_alignment - 1) / scratchpad_alignment * scratchpad_alignment;
    b.data.reset();  // free first: the old contents are never needed
    b.capacity = 0;
    b.data.reset(std::aligned_alloc(scratchpad_alignment, rounded));
    if (!b.data) throw std::bad_alloc();
    b.capacity = rounded;
  }
  return b.data.get();
}

}  // namespace troupe::kernels::onednn
