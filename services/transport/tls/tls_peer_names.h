// Whether a client certificate names an allowed peer, by the rule the gRPC
// port's PeerAuthorizer applies: an exact match of one of its subject
// alternative names (DNS, URI, email, IPv4 address as text) or of its
// common name; no wildcard matching. For servers that see the certificate
// themselves (the HTTP port).
//
//   if (!CertificateNamesOneOf(cert, {"router", "worker"})) refuse();
#pragma once

#include <openssl/x509.h>

#include <string>
#include <vector>

namespace kvfleet::transport {

bool CertificateNamesOneOf(X509* cert, const std::vector<std::string>& allowed);

// Every name the rule above looks at, in certificate order, the CN last.
std::vector<std::string> CertificateNames(X509* cert);

}  // namespace kvfleet::transport
