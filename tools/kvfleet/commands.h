// The kvfleet CLI's subcommands. Each takes its arguments after the command
// name and returns a status; main() prints a failed status and exits 1.
#pragma once

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "common/flags/flags.h"

namespace kvfleet::tools {

using flags::Flags;
using flags::PrintHelp;
using flags::WantsHelp;

using Args = std::vector<std::string>;

absl::Status RunGenerate(const Args& args);
absl::Status RunModelInfo(const Args& args);
absl::Status RunCapacity(const Args& args);
absl::Status RunLogits(const Args& args);
absl::Status RunEval(const Args& args);
absl::Status RunTinyModel(const Args& args);
absl::Status RunRandomLora(const Args& args);
absl::Status RunMakeDraft(const Args& args);
absl::Status RunDumpHidden(const Args& args);
absl::Status RunExportHf(const Args& args);
absl::Status RunBenchModel(const Args& args);
absl::Status RunLoadClient(const Args& args);
absl::Status RunWorkers(const Args& args);
absl::Status RunModels(const Args& args);
absl::Status RunDevices(const Args& args);
absl::Status RunChat(const Args& args);
absl::Status RunUp(const Args& args);

}  // namespace kvfleet::tools
