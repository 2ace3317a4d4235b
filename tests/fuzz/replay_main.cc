// The fuzz targets' main() in the ordinary build (no libFuzzer): runs every
// file under the given corpus directories, then, for --seconds, mutations of
// them (flipped, inserted, deleted and spliced bytes from a fixed seed), so
// CI keeps every target compiling, its regressions fixed and its properties
// exercised without clang. scripts/fuzz.sh runs the real fuzzer.
//
//   gguf_fuzz tests/fuzz/corpus/gguf --seconds 2
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);
extern "C" int LLVMFuzzerInitialize(int* argc, char*** argv) __attribute__((weak));

namespace {

std::string ReadFile(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

void Run(const std::string& input) {
  LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(input.data()), input.size());
}

std::string Mutate(std::string s, const std::vector<std::string>& corpus, std::mt19937_64& rng) {
  const int edits = 1 + static_cast<int>(rng() % 8);
  for (int i = 0; i < edits; ++i) {
    switch (rng() % 5) {
      case 0:  // flip a bit
        if (!s.empty()) s[rng() % s.size()] ^= static_cast<char>(1 << (rng() % 8));
        break;
      case 1:  // insert a byte, often a boundary value
        s.insert(s.begin() + static_cast<long>(s.empty() ? 0 : rng() % (s.size() + 1)),
                 static_cast<char>((rng() % 2) ? rng() : (rng() % 2 ? 0xFF : 0x00)));
        break;
      case 2:  // delete a run
        if (!s.empty()) {
          const size_t at = rng() % s.size();
          s.erase(at, std::min<size_t>(s.size() - at, 1 + rng() % 16));
        }
        break;
      case 3:  // splice in a piece of another input
        if (!corpus.empty()) {
          const std::string& other = corpus[rng() % corpus.size()];
          if (!other.empty()) {
            const size_t from = rng() % other.size();
            s.insert(s.empty() ? 0 : rng() % s.size(), other.substr(from, 1 + rng() % 64));
          }
        }
        break;
      default:  // overwrite four bytes with a large or negative integer
        if (s.size() >= 4) {
          const uint32_t v = (rng() % 2) ? 0xFFFFFFFFu - static_cast<uint32_t>(rng() % 4) : static_cast<uint32_t>(rng());
          std::memcpy(&s[rng() % (s.size() - 3)], &v, 4);
        }
    }
  }
  return s;
}

}  // namespace

int main(int argc, char** argv) {
  if (LLVMFuzzerInitialize != nullptr) LLVMFuzzerInitialize(&argc, &argv);
  double seconds = 0;
  std::vector<std::string> corpus;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--seconds" && i + 1 < argc) {
      seconds = std::stod(argv[++i]);
      continue;
    }
    if (!std::filesystem::is_directory(arg)) {
      std::fprintf(stderr, "%s: not a corpus directory\n", arg.c_str());
      return 2;
    }
    for (const auto& entry : std::filesystem::recursive_directory_iterator(arg)) {
      if (entry.is_regular_file()) corpus.push_back(ReadFile(entry.path()));
    }
  }
  for (const std::string& input : corpus) Run(input);
  Run("");
  std::mt19937_64 rng(20261201);
  int64_t mutations = 0;
  const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  while (!corpus.empty() && std::chrono::steady_clock::now() < until) {
    Run(Mutate(corpus[rng() % corpus.size()], corpus, rng));
    ++mutations;
  }
  std::printf("replayed %zu corpus inputs and %lld mutations\n", corpus.size(), static_cast<long long>(mutations));
  return 0;
}
