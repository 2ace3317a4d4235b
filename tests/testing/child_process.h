// Tests use the launcher's ChildProcess (tools/cluster/child_process.h) under
// their own namespace: one implementation for `kvfleet up` and the tests.
#pragma once

#include "tools/cluster/child_process.h"

namespace kvfleet::testing {

using ChildProcess = ::kvfleet::cluster::ChildProcess;

}  // namespace kvfleet::testing
