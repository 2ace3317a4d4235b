#include "services/transport/tls/tls_files.h"

#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

#include <cstdio>
#include <memory>
#include <vector>

#include "absl/strings/str_cat.h"

namespace kvfleet::transport {
namespace {

struct FileCloser {
  void operator()(std::FILE* f) const { std::fclose(f); }
};
struct X509Free {
  void operator()(X509* x) const { X509_free(x); }
};
struct KeyFree {
  void operator()(EVP_PKEY* k) const { EVP_PKEY_free(k); }
};
using File = std::unique_ptr<std::FILE, FileCloser>;
using Certificate = std::unique_ptr<X509, X509Free>;
using PrivateKey = std::unique_ptr<EVP_PKEY, KeyFree>;

absl::Status Bad(const char* flag, const std::string& path, const std::string& problem) {
  return absl::InvalidArgumentError(absl::StrCat(flag, " ", path, ": ", problem));
}

absl::Status Open(const char* flag, const std::string& path, File& file) {
  file.reset(std::fopen(path.c_str(), "r"));
  if (file == nullptr) return Bad(flag, path, "cannot be read (does it exist, and may this user read it?)");
  return absl::OkStatus();
}

// Every certificate in a PEM file, in order; none is an error.
absl::Status ReadCertificates(const char* flag, const std::string& path, std::vector<Certificate>& out) {
  File file;
  if (absl::Status s = Open(flag, path, file); !s.ok()) return s;
  while (X509* x = PEM_read_X509(file.get(), nullptr, nullptr, nullptr)) out.emplace_back(x);
  ERR_clear_error();  // the read that ends the loop leaves "no start line" behind
  if (out.empty()) return Bad(flag, path, "holds no PEM certificate (-----BEGIN CERTIFICATE-----)");
  return absl::OkStatus();
}

}  // namespace

absl::Status CheckTlsFiles(const TlsFiles& files) {
  if (files.cert.empty() != files.key.empty()) {
    return absl::InvalidArgumentError("--tls-cert and --tls-key go together: give both or neither");
  }
  if (!files.client_ca.empty() && files.cert.empty()) {
    return absl::InvalidArgumentError(
        "--tls-client-ca requires clients to present certificates over TLS: give "
        "--tls-cert and --tls-key too");
  }
  std::vector<Certificate> chain;
  if (!files.cert.empty()) {
    if (absl::Status s = ReadCertificates("--tls-cert", files.cert, chain); !s.ok()) return s;
    File key_file;
    if (absl::Status s = Open("--tls-key", files.key, key_file); !s.ok()) return s;
    PrivateKey key(PEM_read_PrivateKey(key_file.get(), nullptr, nullptr, nullptr));
    ERR_clear_error();
    if (key == nullptr) return Bad("--tls-key", files.key, "holds no unencrypted PEM private key");
    if (X509_check_private_key(chain.front().get(), key.get()) != 1) {
      ERR_clear_error();
      return absl::InvalidArgumentError(absl::StrCat("--tls-key ", files.key,
                                                     " does not match the certificate in --tls-cert ", files.cert,
                                                     " (was one of them replaced without the other?)"));
    }
    if (X509_cmp_current_time(X509_get0_notAfter(chain.front().get())) < 0) {
      return Bad("--tls-cert", files.cert, "has expired; renew it");
    }
  }
  for (const auto& [flag, path] : {std::pair{"--tls-ca", &files.ca}, std::pair{"--tls-client-ca", &files.client_ca}}) {
    if (path->empty()) continue;
    std::vector<Certificate> roots;
    if (absl::Status s = ReadCertificates(flag, *path, roots); !s.ok()) return s;
  }
  return absl::OkStatus();
}

}  // namespace kvfleet::transport
