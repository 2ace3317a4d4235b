// The PEM files a service's TLS comes from, and their check at start-up.
// gRPC's file watcher (which reloads the files when they change, so a
// rotated certificate needs no restart) only logs a file it cannot use and
// then fails every handshake; CheckTlsFiles reads them with OpenSSL first,
// so a service given a bad file exits at once saying which and why.
//
//   RETURN_IF_ERROR(CheckTlsFiles({.cert = "svc.pem", .key = "svc.key", .ca = "ca.pem"}));
#pragma once

#include <string>

#include "absl/status/status.h"

namespace kvfleet::transport {

// How often gRPC's file watcher looks at the files for a rotation.
inline constexpr unsigned kTlsRefreshSeconds = 10;

struct TlsFiles {
  std::string cert;       // this service's certificate chain; empty: no TLS on its port
  std::string key;        // its private key
  std::string ca;         // verifies the servers this service calls
  std::string client_ca;  // set: clients must present a certificate it signed (mutual TLS)

  bool serves_tls() const { return !cert.empty(); }
};

// Every named file readable and parseable (certificates, a private key), the
// key the certificate's, the certificate not expired. INVALID_ARGUMENT
// naming the flag, the file and the problem; OK when nothing is named.
absl::Status CheckTlsFiles(const TlsFiles& files);

}  // namespace kvfleet::transport
