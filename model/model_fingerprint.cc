#include "model/model_fingerprint.h"

#include <openssl/evp.h>

#include <algorithm>
#include <array>
#include <memory>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "common/check.h"

namespace kvfleet::model {

std::string ModelFingerprint(const Model& model) {
  std::vector<const TensorView*> tensors;
  for (const TensorView& t : model.source().tensors()) tensors.push_back(&t);
  std::sort(tensors.begin(), tensors.end(), [](const TensorView* a, const TensorView* b) { return a->name < b->name; });
  struct ContextDeleter {
    void operator()(EVP_MD_CTX* c) const { EVP_MD_CTX_free(c); }
  };
  std::unique_ptr<EVP_MD_CTX, ContextDeleter> ctx(EVP_MD_CTX_new());
  CHECK(ctx != nullptr && EVP_DigestInit_ex(ctx.get(), EVP_sha256(), nullptr) == 1) << "SHA-256 failed";
  for (const TensorView* t : tensors) {
    std::string header = absl::StrCat(t->name, "|", static_cast<int>(t->dtype), "|");
    for (int64_t d : t->shape) absl::StrAppend(&header, d, ",");
    absl::StrAppend(&header, "|", t->num_bytes, "\n");
    CHECK(EVP_DigestUpdate(ctx.get(), header.data(), header.size()) == 1 &&
          EVP_DigestUpdate(ctx.get(), t->data, static_cast<size_t>(t->num_bytes)) == 1)
        << "SHA-256 failed";
  }
  std::array<unsigned char, EVP_MAX_MD_SIZE> md{};
  unsigned int size = 0;
  CHECK(EVP_DigestFinal_ex(ctx.get(), md.data(), &size) == 1) << "SHA-256 failed";
  return absl::BytesToHexString(absl::string_view(reinterpret_cast<const char*>(md.data()), size));
}

}  // namespace kvfleet::model
