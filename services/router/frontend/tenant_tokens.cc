#include "services/router/frontend/tenant_tokens.h"

#include <openssl/crypto.h>
#include <openssl/sha.h>

#include <fstream>
#include <set>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/logging.h"

namespace kvfleet::router {
namespace {

constexpr auto kCheckInterval = std::chrono::seconds(1);

bool ValidTenant(std::string_view name) {
  if (name.empty() || name.size() > 64) return false;
  for (char c : name) {
    if (!absl::ascii_isalnum(static_cast<unsigned char>(c)) && c != '.' && c != '_' && c != '-') return false;
  }
  return true;
}

absl::StatusOr<std::string> ReadFile(const std::string& path) {
  std::ifstream f(path);
  if (!f) return absl::NotFoundError(absl::StrCat("cannot read the token file ", path));
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

}  // namespace

TenantTokens::Digest TenantTokens::Sha256(std::string_view text) {
  Digest d{};
  SHA256(reinterpret_cast<const unsigned char*>(text.data()), text.size(), d.data());
  return d;
}

absl::StatusOr<std::vector<TenantTokens::Entry>> TenantTokens::Parse(std::string_view text, const std::string& path) {
  std::vector<Entry> entries;
  std::set<Digest> seen;
  int line_number = 0;
  for (absl::string_view line : absl::StrSplit(absl::string_view(text.data(), text.size()), '\n')) {
    ++line_number;
    line = absl::StripAsciiWhitespace(line.substr(0, line.find('#')));
    if (line.empty()) continue;
    std::vector<absl::string_view> fields = absl::StrSplit(line, absl::ByAnyChar(" \t"), absl::SkipEmpty());
    const auto bad = [&](const std::string& why) {
      return absl::InvalidArgumentError(absl::StrCat(path, ":", line_number, ": ", why));
    };
    if (fields.size() != 2) return bad("want '<sha256 of the token, 64 hex digits> <tenant>'");
    const std::string hex = absl::AsciiStrToLower(std::string(fields[0]));
    if (hex.size() != 64 || hex.find_first_not_of("0123456789abcdef") != std::string::npos) {
      return bad("the first field must be the token's SHA-256 as 64 hex digits (e.g. `printf %s TOKEN | sha256sum`), "
                 "not the token itself");
    }
    if (!ValidTenant(std::string_view(fields[1].data(), fields[1].size()))) {
      return bad("a tenant name is 1 to 64 of A-Z a-z 0-9 . _ -");
    }
    Entry e{.tenant = std::string(fields[1])};
    const std::string bytes = absl::HexStringToBytes(hex);
    std::copy(bytes.begin(), bytes.end(), e.digest.begin());
    if (!seen.insert(e.digest).second) return bad("this digest is listed twice");
    entries.push_back(std::move(e));
  }
  return entries;
}

absl::StatusOr<std::unique_ptr<TenantTokens>> TenantTokens::Load(const std::string& path) {
  absl::StatusOr<std::string> text = ReadFile(path);
  if (!text.ok()) return text.status();
  absl::StatusOr<std::vector<Entry>> entries = Parse(*text, path);
  if (!entries.ok()) return entries.status();
  std::error_code ec;
  const auto mtime = std::filesystem::last_write_time(path, ec);
  return std::unique_ptr<TenantTokens>(new TenantTokens(path, std::move(*entries), mtime));
}

TenantTokens::TenantTokens(std::string path, std::vector<Entry> entries, std::filesystem::file_time_type mtime)
    : path_(std::move(path)),
      entries_(std::make_shared<const std::vector<Entry>>(std::move(entries))),
      mtime_(mtime),
      last_check_(std::chrono::steady_clock::now()) {}

void TenantTokens::ReloadIfChanged() {
  {
    absl::MutexLock lock(&mu_);
    const auto now = std::chrono::steady_clock::now();
    if (now - last_check_ < kCheckInterval) return;
    last_check_ = now;
    std::error_code ec;
    const auto mtime = std::filesystem::last_write_time(path_, ec);
    if (ec || mtime == mtime_) return;
    mtime_ = mtime;
  }
  absl::StatusOr<std::string> text = ReadFile(path_);
  absl::StatusOr<std::vector<Entry>> entries =
      text.ok() ? Parse(*text, path_) : absl::StatusOr<std::vector<Entry>>(text.status());
  if (!entries.ok()) {
    KVFLEET_LOG_ERROR("token file changed but cannot be used ({}); keeping the previous tokens",
                      entries.status().ToString());
    return;
  }
  KVFLEET_LOG_INFO("token file {} reloaded: {} tokens", path_, entries->size());
  absl::MutexLock lock(&mu_);
  entries_ = std::make_shared<const std::vector<Entry>>(std::move(*entries));
}

std::optional<std::string> TenantTokens::Lookup(std::string_view token) {
  if (token.empty()) return std::nullopt;
  ReloadIfChanged();
  std::shared_ptr<const std::vector<Entry>> entries;
  {
    absl::MutexLock lock(&mu_);
    entries = entries_;
  }
  const Digest digest = Sha256(token);
  const Entry* match = nullptr;
  for (const Entry& e : *entries) {  // every entry, whatever matches: no early exit
    if (CRYPTO_memcmp(e.digest.data(), digest.data(), digest.size()) == 0) match = &e;
  }
  if (match == nullptr) return std::nullopt;
  return match->tenant;
}

}  // namespace kvfleet::router
