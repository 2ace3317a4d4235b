#include "common/cache_dir.h"

#include <cstdlib>

namespace kvfleet {
namespace {

std::string Env(const char* name) {
  const char* v = std::getenv(name);
  return v == nullptr ? std::string() : std::string(v);
}

}  // namespace

std::string DefaultCacheDir() {
  if (std::string dir = Env("KVFLEET_CACHE_DIR"); !dir.empty()) return dir;
  if (std::string xdg = Env("XDG_CACHE_HOME"); !xdg.empty()) return xdg + "/kvfleet";
  if (std::string home = Env("HOME"); !home.empty()) return home + "/.cache/kvfleet";
  return "";
}

}  // namespace kvfleet
