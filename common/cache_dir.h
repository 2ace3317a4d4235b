// Where kvfleet keeps what it can recompute (a model's fingerprint): the
// same folder the scripts fetch dependencies and models into.
//
//   std::string dir = DefaultCacheDir();  // "/root/.cache/kvfleet"
#pragma once

#include <string>

namespace kvfleet {

// $KVFLEET_CACHE_DIR, else $XDG_CACHE_HOME/kvfleet, else
// $HOME/.cache/kvfleet; empty when none of them is set.
std::string DefaultCacheDir();

}  // namespace kvfleet
