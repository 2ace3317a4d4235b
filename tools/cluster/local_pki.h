// Throwaway certificates for TLS on loopback: a certificate authority and
// certificates it signs, each valid for 127.0.0.1 and localhost, written as
// PEM files by the `openssl` command (Debian's openssl package). For
// `kvfleet up --tls` and the TLS tests; never for production, where the
// operator's own CA (or cert-manager) issues them.
//
//   ASSIGN_OR_RETURN(LocalCa ca, LocalCa::Create(dir + "/ca"));
//   ASSIGN_OR_RETURN(CertificateFiles router, ca.Issue(dir + "/router", "router"));
#pragma once

#include <string>

#include "absl/status/statusor.h"

namespace kvfleet::cluster {

struct CertificateFiles {
  std::string cert;  // PEM certificate
  std::string key;   // PEM private key (unencrypted)
};

class LocalCa {
 public:
  // A new CA: `prefix`.pem and `prefix`.key. Fails naming the openssl
  // command that failed (or that openssl is missing).
  static absl::StatusOr<LocalCa> Create(const std::string& prefix, const std::string& name = "kvfleet local CA");

  // A certificate for `common_name` (also a DNS name in it) with SANs
  // 127.0.0.1 and localhost, valid `days`, signed by this CA: `prefix`.pem
  // and `prefix`.key.
  absl::StatusOr<CertificateFiles> Issue(const std::string& prefix, const std::string& common_name,
                                         int days = 30) const;

  const CertificateFiles& files() const { return files_; }

 private:
  explicit LocalCa(CertificateFiles files) : files_(std::move(files)) {}
  CertificateFiles files_;
};

}  // namespace kvfleet::cluster
