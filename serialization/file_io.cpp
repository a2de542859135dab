#include "serialization/file_io.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
// Unused here, and ONNX's parser.h (onnx_reader.cpp) has an enumerator of that name: gone, so a
// unity build may compile the two in one translation unit.
#undef MAP_TYPE

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <thread>

#include "troupe/error.hpp"

namespace troupe::serialization {

namespace {

std::string reason() {
  return std::strerror(errno);
}

struct Fd {
  int fd;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

}  // namespace

FileBytes map_file(const std::string& path, const char* what) {
  Fd file{::open(path.c_str(), O_RDONLY | O_CLOEXEC)};
  if (file.fd < 0)
    throw InvalidArgument(std::string("cannot open ") + what + " '" + path + "': " + reason());
  struct stat st {};
  if (::fstat(file.fd, &st) != 0)
    throw InvalidArgument(std::string("cannot stat ") + what + " '" + path + "': " + reason());
  if (S_ISDIR(st.st_mode))
    throw InvalidArgument(std::string("cannot read ") + what + " '" + path +
                          "': it is a directory");
  FileBytes bytes;
  bytes.size = static_cast<uint64_t>(st.st_size);
  if (bytes.size == 0) return bytes;
  // PROT_WRITE with MAP_PRIVATE: tensors wrap the mapping as mutable memory; a write would only
  // touch this process's copy of the page.
  void* p = ::mmap(nullptr, bytes.size, PROT_READ | PROT_WRITE, MAP_PRIVATE, file.fd, 0);
  if (p != MAP_FAILED) {
    const uint64_t size = bytes.size;
    bytes.owner = std::shared_ptr<void>(p, [size](void* q) { ::munmap(q, size); });
    bytes.data = static_cast<const unsigned char*>(p);
    bytes.mapped = true;
    return bytes;
  }
  // Not mappable (e.g. a pipe or special file system): read it.
  void* buffer = std::aligned_alloc(64, (bytes.size + 63) / 64 * 64);
  if (!buffer) throw std::bad_alloc();
  bytes.owner = std::shared_ptr<void>(buffer, [](void* q) { std::free(q); });
  uint64_t done = 0;
  while (done < bytes.size) {
    ssize_t n = ::read(file.fd, static_cast<char*>(buffer) + done, bytes.size - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0)
      throw InvalidArgument(std::string("error while reading ") + what + " '" + path + "': " +
                            (n == 0 ? std::string("file shrank while being read") : reason()));
    done += static_cast<uint64_t>(n);
  }
  bytes.data = static_cast<const unsigned char*>(buffer);
  return bytes;
}

void write_file_atomically(const std::string& path,
                           const std::function<void(std::ostream&)>& write) {
  static std::atomic<uint64_t> counter{0};
  const std::string temp =
      path + ".tmp." + std::to_string(::getpid()) + "." +
      std::to_string(std::hash<std::thread::id>()(std::this_thread::get_id()) % 100000) + "." +
      std::to_string(counter++);
  auto fail = [&](const std::string& why) {
    std::error_code ignored;
    std::filesystem::remove(temp, ignored);
    throw InvalidArgument("cannot write '" + path + "': " + why);
  };
  {
    std::ofstream out(temp, std::ios::binary | std::ios::trunc);
    if (!out) fail(reason());
    try {
      write(out);
    } catch (...) {
      out.close();
      std::error_code ignored;
      std::filesystem::remove(temp, ignored);
      throw;
    }
    out.flush();
    if (!out) fail("write failed (" + reason() + ")");
    out.close();
    if (!out) fail("close failed (" + reason() + ")");
  }
  std::error_code ec;
  std::filesystem::rename(temp, path, ec);
  if (ec) fail("rename of the temporary file failed (" + ec.message() + ")");
}

}  // namespace troupe::serialization
