// Replays a fuzz target's corpus outside libFuzzer: calls LLVMFuzzerTestOneInput on every file of
// the directories (or the files) given, in name order, naming each before it runs so that a crash
// is attributed to its input. Exits 1 when an input throws (the targets swallow troupe::Error, so
// any exception that reaches here is a finding) or when a directory holds no input at all (an
// empty corpus would make the test pass without testing anything).

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

namespace fs = std::filesystem;

int main(int argc, char** argv) {
  std::vector<fs::path> inputs;
  for (int i = 1; i < argc; ++i) {
    if (fs::is_directory(argv[i])) {
      size_t before = inputs.size();
      for (const auto& entry : fs::directory_iterator(argv[i]))
        if (entry.is_regular_file() && entry.path().extension() != ".dict")
          inputs.push_back(entry.path());
      if (inputs.size() == before) {
        std::fprintf(stderr, "replay: %s holds no input\n", argv[i]);
        return 1;
      }
    } else {
      inputs.emplace_back(argv[i]);
    }
  }
  if (inputs.empty()) {
    std::fprintf(stderr, "usage: %s CORPUS_DIR|FILE...\n", argv[0]);
    return 2;
  }
  std::sort(inputs.begin(), inputs.end());
  for (const fs::path& path : inputs) {
    std::printf("replay: %s\n", path.string().c_str());
    std::fflush(stdout);
    std::ifstream in(path, std::ios::binary);
    std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(in)),
                               std::istreambuf_iterator<char>());
    try {
      LLVMFuzzerTestOneInput(bytes.data(), bytes.size());
    } catch (const std::exception& e) {
      std::fprintf(stderr, "replay: %s threw %s\n", path.string().c_str(), e.what());
      return 1;
    } catch (...) {
      std::fprintf(stderr, "replay: %s threw a non-exception\n", path.string().c_str());
      return 1;
    }
  }
  std::printf("replay: %zu inputs, no finding\n", inputs.size());
  return 0;
}
