// Where kvfleet keeps what it can recompute (a model's fingerprint); by
// default the folder the scripts also fetch dependencies and models under
// (they have overrides of their own).
//
//   std::string dir = DefaultCacheDir();  // "/root/.cache/kvfleet"
#pragma once

#include <string>

namespace kvfleet {

// $KVFLEET_CACHE_DIR, else $XDG_CACHE_HOME/kvfleet, else
// $HOME/.cache/kvfleet; empty when none of them is set.
std::string DefaultCacheDir();

}  // namespace kvfleet
