#include "tools/cluster/local_pki.h"

#include <fstream>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"
#include "tools/cluster/child_process.h"
#include "tools/cluster/service_process.h"

namespace kvfleet::cluster {
namespace {

absl::Status Openssl(const std::vector<std::string>& args, const std::string& log_path) {
  absl::StatusOr<std::unique_ptr<ChildProcess>> child = ChildProcess::Start("openssl", args, log_path);
  if (!child.ok()) {
    return absl::FailedPreconditionError(
        absl::StrCat("cannot run openssl (install Debian's openssl package): ", child.status().message()));
  }
  ASSIGN_OR_RETURN(int code, (*child)->Wait(absl::Seconds(60)));
  if (code != 0) {
    return absl::InternalError(absl::StrCat("openssl ", absl::StrJoin(args, " "), " exited ", code, ": ",
                                            LogTail(log_path, 1024)));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<LocalCa> LocalCa::Create(const std::string& prefix, const std::string& name) {
  CertificateFiles ca{.cert = prefix + ".pem", .key = prefix + ".key"};
  RETURN_IF_ERROR(Openssl({"req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
                           "-keyout", ca.key, "-out", ca.cert, "-days", "30", "-subj", "/CN=" + name, "-addext",
                           "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign,cRLSign"},
                          prefix + ".log"));
  return LocalCa(std::move(ca));
}

absl::StatusOr<CertificateFiles> LocalCa::Issue(const std::string& prefix, const std::string& common_name,
                                                int days) const {
  CertificateFiles out{.cert = prefix + ".pem", .key = prefix + ".key"};
  const std::string request = prefix + ".csr", extensions = prefix + ".ext", log = prefix + ".log";
  RETURN_IF_ERROR(Openssl({"req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-keyout",
                           out.key, "-out", request, "-subj", "/CN=" + common_name},
                          log));
  std::ofstream(extensions) << "subjectAltName=DNS:" << common_name << ",DNS:localhost,IP:127.0.0.1\n"
                            << "extendedKeyUsage=serverAuth,clientAuth\n";
  RETURN_IF_ERROR(Openssl({"x509", "-req", "-in", request, "-CA", files_.cert, "-CAkey", files_.key,
                           "-CAcreateserial", "-out", out.cert, "-days", absl::StrCat(days), "-extfile", extensions},
                          log));
  return out;
}

}  // namespace kvfleet::cluster
