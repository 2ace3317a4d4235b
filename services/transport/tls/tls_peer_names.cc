#include "services/transport/tls/tls_peer_names.h"

#include <arpa/inet.h>
#include <openssl/x509v3.h>

#include <algorithm>

namespace kvfleet::transport {

std::vector<std::string> CertificateNames(X509* cert) {
  std::vector<std::string> names;
  if (auto* sans = static_cast<GENERAL_NAMES*>(X509_get_ext_d2i(cert, NID_subject_alt_name, nullptr, nullptr))) {
    for (int i = 0; i < sk_GENERAL_NAME_num(sans); ++i) {
      const GENERAL_NAME* san = sk_GENERAL_NAME_value(sans, i);
      if (san->type == GEN_DNS || san->type == GEN_URI || san->type == GEN_EMAIL) {
        const ASN1_IA5STRING* text = san->d.ia5;
        names.emplace_back(reinterpret_cast<const char*>(ASN1_STRING_get0_data(text)), ASN1_STRING_length(text));
      } else if (san->type == GEN_IPADD && ASN1_STRING_length(san->d.iPAddress) == 4) {
        char text[INET_ADDRSTRLEN] = {};
        inet_ntop(AF_INET, ASN1_STRING_get0_data(san->d.iPAddress), text, sizeof(text));
        names.emplace_back(text);
      }
    }
    GENERAL_NAMES_free(sans);
  }
  char common_name[256] = {};
  if (X509_NAME_get_text_by_NID(X509_get_subject_name(cert), NID_commonName, common_name, sizeof(common_name)) > 0) {
    names.emplace_back(common_name);
  }
  return names;
}

bool CertificateNamesOneOf(X509* cert, const std::vector<std::string>& allowed) {
  for (const std::string& name : CertificateNames(cert)) {
    if (std::find(allowed.begin(), allowed.end(), name) != allowed.end()) return true;
  }
  return false;
}

}  // namespace kvfleet::transport
