// tensor_dump: kvfleet's dequantization of every tensor of a GGUF file, for
// tests/reference/dequant_reference.py to compare with the gguf package's
// numpy dequantization. Prints one line per tensor:
//   <name> TAB <type> TAB <elements> TAB <sha256 of the float32 values, little-endian, row-major>
// so the two sides agree bit for bit without writing gigabytes; with
// --tensor NAME --out FILE it writes that tensor's float32 values instead
// (to look at a mismatch).
//
//   tensor_dump --model M.gguf [--tensor NAME --out FILE]
#include <openssl/evp.h>

#include <cstdio>
#include <fstream>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "kernels/cpu/quantize.h"
#include "model/gguf/gguf_file.h"

namespace kvfleet {
namespace {

std::string Hex(const unsigned char* bytes, unsigned int n) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out;
  for (unsigned int i = 0; i < n; ++i) {
    out.push_back(kDigits[bytes[i] >> 4]);
    out.push_back(kDigits[bytes[i] & 15]);
  }
  return out;
}

// The tensor's rows (GGUF's shape[0] is the row length) dequantized one by
// one into `row`, each passed to `sink`.
template <typename Sink>
void ForEachRow(const model::TensorInfo& t, Sink sink) {
  const int64_t cols = t.shape[0], rows = t.num_elements / cols, row_bytes = RowBytes(t.dtype, cols);
  std::vector<float> row(static_cast<size_t>(cols));
  for (int64_t r = 0; r < rows; ++r) {
    kernels::DequantizeRow(t.dtype, t.data + r * row_bytes, row.data(), cols);
    sink(row);
  }
}

absl::Status Run(const std::map<std::string, std::string>& flags) {
  const auto model = flags.find("model");
  if (model == flags.end()) return absl::InvalidArgumentError("usage: tensor_dump --model M.gguf [--tensor N --out F]");
  ASSIGN_OR_RETURN(std::unique_ptr<model::GgufFile> file, model::GgufFile::Open(model->second));
  if (const auto name = flags.find("tensor"); name != flags.end()) {
    const model::TensorInfo* t = file->FindTensor(name->second);
    if (t == nullptr) return absl::NotFoundError(absl::StrCat("no tensor ", name->second));
    std::ofstream out(flags.at("out"), std::ios::binary);
    ForEachRow(*t, [&](const std::vector<float>& row) {
      out.write(reinterpret_cast<const char*>(row.data()), static_cast<std::streamsize>(row.size() * sizeof(float)));
    });
    return out ? absl::OkStatus() : absl::InternalError("write failed");
  }
  for (const model::TensorInfo& t : file->tensors()) {
    std::unique_ptr<EVP_MD_CTX, decltype(&EVP_MD_CTX_free)> ctx(EVP_MD_CTX_new(), EVP_MD_CTX_free);
    EVP_DigestInit_ex(ctx.get(), EVP_sha256(), nullptr);
    ForEachRow(t, [&](const std::vector<float>& row) {
      EVP_DigestUpdate(ctx.get(), row.data(), row.size() * sizeof(float));
    });
    unsigned char digest[EVP_MAX_MD_SIZE];
    unsigned int n = 0;
    EVP_DigestFinal_ex(ctx.get(), digest, &n);
    std::printf("%s\t%s\t%lld\t%s\n", t.name.c_str(), DTypeName(t.dtype), static_cast<long long>(t.num_elements),
                Hex(digest, n).c_str());
  }
  return absl::OkStatus();
}

}  // namespace
}  // namespace kvfleet

int main(int argc, char** argv) {
  std::map<std::string, std::string> flags;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string key = argv[i];
    if (key.rfind("--", 0) == 0) flags[key.substr(2)] = argv[i + 1];
  }
  const absl::Status s = kvfleet::Run(flags);
  if (!s.ok()) {
    std::fprintf(stderr, "tensor_dump: %s\n", s.ToString().c_str());
    return 1;
  }
  return 0;
}
