// A child process: a program started with arguments, its stdout read line
// by line, its stderr appended to a file (or inherited). Used by
// `kvfleet up` to run a local cluster and by the integration tests.
//
// Owns the child's pid and the read end of its stdout pipe. A background
// thread drains stdout into a line buffer from the start, so a child that
// keeps printing after the line a test waited for never blocks on a full
// pipe. Invariants: the child runs in its own process group; the destructor
// SIGKILLs that group (grandchildren included, even after the child itself
// exited) and reaps the child, so a failed test (or launcher) leaves no process behind.
// Thread-safety: WaitForLine, StdoutLines, Signal, Wait and Running may be
// called from any thread; the object itself must outlive those calls.
//
//   ASSIGN_OR_RETURN(auto child, ChildProcess::Start("/bin/sh", {"-c", "echo ready; sleep 30"}));
//   ASSIGN_OR_RETURN(std::string line, child->WaitForLine("ready", absl::Seconds(5)));
#pragma once

#include <sys/types.h>

#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace kvfleet::cluster {

class ChildProcess {
 public:
  // Starts `program` (looked up in PATH when it has no slash) with `args`
  // (argv[1..]). Its stderr is appended to `stderr_path`, or inherited from
  // this process when empty. Fails when the program cannot be executed.
  static absl::StatusOr<std::unique_ptr<ChildProcess>> Start(const std::string& program,
                                                             const std::vector<std::string>& args,
                                                             const std::string& stderr_path = "");

  ~ChildProcess();
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;

  // Returns the next stdout line (without its newline) that starts with
  // `prefix`; lines before it are consumed. Fails with the lines seen so far
  // when stdout closes (the child exited) or `timeout` passes first.
  absl::StatusOr<std::string> WaitForLine(const std::string& prefix, absl::Duration timeout);

  // Every complete stdout line read so far, in order (consumed or not).
  std::vector<std::string> StdoutLines() const;

  // Sends `sig` to the child (not its group). No-op once it has been reaped.
  void Signal(int sig);

  // Waits for the child to exit: its exit code, or 128 + the signal that
  // killed it. Fails with DEADLINE_EXCEEDED after `timeout` (the child keeps
  // running). Returns the same value again once reaped.
  absl::StatusOr<int> Wait(absl::Duration timeout);

  // True until the child has exited (reaps it when it has).
  bool Running();

  pid_t pid() const { return pid_; }

 private:
  ChildProcess(pid_t pid, int stdout_fd, int wake_read_fd, int wake_write_fd);

  void DrainStdout();  // the reader thread's body
  void AppendOutput(const char* data, size_t n) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Reaps the child without blocking; true when it has exited.
  bool TryReap() ABSL_EXCLUSIVE_LOCKS_REQUIRED(wait_mu_);
  std::string LinesSeen() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const pid_t pid_;
  const int stdout_fd_;
  // A self-pipe that wakes the reader thread at destruction: a grandchild
  // may still hold the stdout pipe open after the child itself is gone.
  const int wake_read_fd_;
  const int wake_write_fd_;

  mutable absl::Mutex mu_;
  std::vector<std::string> lines_ ABSL_GUARDED_BY(mu_);
  size_t next_line_ ABSL_GUARDED_BY(mu_) = 0;  // first line WaitForLine has not consumed
  std::string partial_ ABSL_GUARDED_BY(mu_);   // the current line, before its newline
  bool eof_ ABSL_GUARDED_BY(mu_) = false;

  absl::Mutex wait_mu_;
  std::optional<int> exit_code_ ABSL_GUARDED_BY(wait_mu_);  // set once reaped

  std::thread reader_;
};

}  // namespace kvfleet::cluster
