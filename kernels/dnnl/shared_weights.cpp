// Packed constant weights shared across kernels. Every execute stream creates its own kernels
// (and a stream with dynamic shapes one set per shape), and each packed its own copy of every
// weight: ResNet-50 on two streams took 207 MB more memory than on one. Entries are keyed by the
// constant's address and both layouts; an entry holds the constant's storage, so the address
// cannot belong to another tensor while the entry is alive. Constants are immutable once in a
// model (troupe/model.hpp), so the same address means the same contents. The key assumes a plain
// reorder: packing with reorder attributes (scales, zero points) would have to extend it.
#include "kernels/dnnl/shared_weights.hpp"

#include <sys/mman.h>

#include <algorithm>
#include <cstdlib>
#include <iterator>
#include <mutex>
#include <new>
#include <unordered_map>
#include <vector>

#include "kernels/dnnl/dnnl_kernel.hpp"

namespace troupe::kernels::onednn {

namespace {

// One packed form of one constant. Its own lock lets different constants be packed at once while
// a second kernel asking for the same one waits for the first to pack it.
struct Slot {
  dnnl::memory::desc plain;
  dnnl::memory::desc packed;
  std::mutex mutex;
  std::weak_ptr<const SharedWeights> weights;  // guarded by mutex
  Tensor source;                               // guarded by mutex; keeps the key's address taken
};

struct Cache {
  std::mutex mutex;
  std::unordered_map<const void*, std::vector<std::shared_ptr<Slot>>> slots;

  // Drops the slots no kernel holds and nobody is packing (only the map holds the slot).
  void prune() {
    for (auto it = slots.begin(); it != slots.end();) {
      auto& list = it->second;
      list.erase(std::remove_if(list.begin(), list.end(),
                                [](const std::shared_ptr<Slot>& slot) {
                                  if (slot.use_count() > 1) return false;
                                  const std::lock_guard<std::mutex> lock(slot->mutex);
                                  return slot->weights.expired();
                                }),
                 list.end());
      it = list.empty() ? slots.erase(it) : std::next(it);
    }
  }

  std::shared_ptr<Slot> slot_for(const void* data, const dnnl::memory::desc& plain,
                                 const dnnl::memory::desc& packed) {
    const std::lock_guard<std::mutex> lock(mutex);
    prune();
    std::vector<std::shared_ptr<Slot>>& list = slots[data];
    for (const auto& slot : list)
      if (slot->plain == plain && slot->packed == packed) return slot;
    auto slot = std::make_shared<Slot>();
    slot->plain = plain;
    slot->packed = packed;
    list.push_back(slot);
    return slot;
  }
};

Cache& cache() {
  static Cache instance;
  return instance;
}

}  // namespace

namespace {

constexpr size_t huge_page_bytes = size_t{2} << 20;

std::shared_ptr<const SharedWeights> shared_weights(
    const Tensor& weights, const dnnl::memory::desc& plain, const dnnl::memory::desc& packed,
    const std::function<void(const Tensor&, dnnl::memory&)>& fill) {
  const std::shared_ptr<Slot> slot = cache().slot_for(weights.raw_data(), plain, packed);
  const std::lock_guard<std::mutex> lock(slot->mutex);
  if (auto shared = slot->weights.lock()) return shared;
  auto shared = std::make_shared<SharedWeights>();
  slot->source = weights;
  shared->source_address = weights.raw_data();
  const size_t bytes = packed.get_size();
  if (bytes >= huge_page_bytes) {
    // A large copy is read whole on every run where a batch-1 fully connected layer streams it:
    // on 2 MB pages its reads miss the TLB 512 times less often. (A model file's constants are
    // mapped from the page cache, which gives them large pages where the file system has them.)
    // Only whole large pages: the tail stays on small pages, so the copy takes no more memory.
    const size_t rounded = (bytes + huge_page_bytes - 1) / huge_page_bytes * huge_page_bytes;
    void* buffer = std::aligned_alloc(huge_page_bytes, rounded);
    if (!buffer) throw std::bad_alloc();
    // Advice only: small pages where the kernel refuses it.
    ::madvise(buffer, bytes / huge_page_bytes * huge_page_bytes, MADV_HUGEPAGE);
    shared->storage = std::shared_ptr<void>(buffer, [](void* p) { std::free(p); });
    shared->packed = dnnl::memory(packed, cpu_engine(), buffer);
  } else {
    shared->packed = dnnl::memory(packed, cpu_engine());
  }
  fill(weights, shared->packed);
  slot->weights = shared;
  return shared;
}

}  // namespace

std::shared_ptr<const SharedWeights> shared_packed_weights(const Tensor& weights,
                                                           const dnnl::memory::desc& plain,
                                                           const dnnl::memory::desc& packed,
                                                           const dnnl::stream& stream) {
  return shared_weights(weights, plain, packed, [&](const Tensor& w, dnnl::memory& target) {
    dnnl::memory source(plain, cpu_engine(), const_cast<void*>(w.raw_data()));
    dnnl::stream s(stream);  // a handle copy: execute() and wait() are not const
    dnnl::reorder(source, target).execute(s, source, target);
    s.wait();
  });
}

std::shared_ptr<const SharedWeights> shared_transformed_weights(
    const Tensor& weights, const dnnl::memory::desc& plain, const dnnl::memory::desc& transformed,
    const std::function<void(const Tensor&, dnnl::memory&)>& transform) {
  if (transformed.dims() == plain.dims())
    throw ExecutionError("a transformed form of a constant must have other dims than the plain");
  return shared_weights(weights, plain, transformed, transform);
}

void forget_shared_source(const SharedWeights& weights) {
  Cache& c = cache();
  const std::lock_guard<std::mutex> lock(c.mutex);
  c.prune();
  auto it = c.slots.find(weights.source_address);
  if (it == c.slots.end()) return;
  auto& list = it->second;
  list.erase(std::remove_if(list.begin(), list.end(),
                            [&](const std::shared_ptr<Slot>& slot) {
                              const std::lock_guard<std::mutex> slot_lock(slot->mutex);
                              return slot->weights.lock().get() == &weights;
                            }),
             list.end());
  if (list.empty()) c.slots.erase(it);
}

Tensor unpack_shared_weights(const SharedWeights& weights, const dnnl::memory::desc& plain,
                             ElementType type, const Shape& shape) {
  Tensor result(type, shape);
  dnnl::memory target(plain, cpu_engine(), result.raw_data());
  dnnl::memory source = weights.packed;  // a handle copy: execute() takes non-const memory
  dnnl::stream stream(cpu_engine());
  dnnl::reorder(source, target).execute(stream, source, target);
  stream.wait();
  return result;
}

size_t shared_packed_weights_count() {
  Cache& c = cache();
  const std::lock_guard<std::mutex> lock(c.mutex);
  c.prune();
  size_t n = 0;
  for (const auto& [key, list] : c.slots)
    for (const auto& slot : list) {
      const std::lock_guard<std::mutex> slot_lock(slot->mutex);
      n += slot->weights.expired() ? 0 : 1;
    }
  return n;
}

}  // namespace troupe::kernels::onednn
