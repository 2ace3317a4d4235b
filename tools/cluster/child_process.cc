#include "tools/cluster/child_process.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

extern char** environ;

namespace kvfleet::cluster {

namespace {

// How many trailing lines an error message quotes: enough to see why a
// child stopped, few enough to keep a test log readable.
constexpr size_t kLinesInErrors = 30;

absl::Status ErrnoError(const std::string& what, int err) {
  return absl::InternalError(absl::StrCat(what, ": ", std::strerror(err)));
}

// Spawn attributes: a process group of its own (so the destructor can kill
// grandchildren too) and default dispositions for the signals tests send,
// in case this process ignores them (ignored dispositions survive exec).
absl::Status InitSpawnAttr(posix_spawnattr_t& attr) {
  posix_spawnattr_init(&attr);
  sigset_t defaults;
  sigemptyset(&defaults);
  for (int sig : {SIGPIPE, SIGTERM, SIGINT, SIGHUP}) sigaddset(&defaults, sig);
  sigset_t empty;
  sigemptyset(&empty);
  posix_spawnattr_setsigdefault(&attr, &defaults);
  posix_spawnattr_setsigmask(&attr, &empty);
  posix_spawnattr_setpgroup(&attr, 0);
  const short flags = POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK;
  if (int err = posix_spawnattr_setflags(&attr, flags); err != 0) return ErrnoError("posix_spawnattr_setflags", err);
  return absl::OkStatus();
}

absl::Status InitFileActions(posix_spawn_file_actions_t& actions, int stdout_write_fd, const std::string& stderr_path) {
  posix_spawn_file_actions_init(&actions);
  // dup2 clears FD_CLOEXEC on the target, so only fd 1 survives the exec.
  if (int err = posix_spawn_file_actions_adddup2(&actions, stdout_write_fd, STDOUT_FILENO); err != 0) {
    return ErrnoError("posix_spawn_file_actions_adddup2", err);
  }
  if (!stderr_path.empty()) {
    if (int err = posix_spawn_file_actions_addopen(&actions, STDERR_FILENO, stderr_path.c_str(),
                                                   O_WRONLY | O_CREAT | O_APPEND, 0644);
        err != 0) {
      return ErrnoError("posix_spawn_file_actions_addopen", err);
    }
  }
  return absl::OkStatus();
}

int ExitCodeOf(int wait_status) {
  if (WIFEXITED(wait_status)) return WEXITSTATUS(wait_status);
  if (WIFSIGNALED(wait_status)) return 128 + WTERMSIG(wait_status);
  return -1;
}

}  // namespace

absl::StatusOr<std::unique_ptr<ChildProcess>> ChildProcess::Start(const std::string& program,
                                                                  const std::vector<std::string>& args,
                                                                  const std::string& stderr_path) {
  int out[2], wake[2];
  if (::pipe2(out, O_CLOEXEC) != 0) return ErrnoError("pipe2", errno);
  if (::pipe2(wake, O_CLOEXEC) != 0) {
    const int err = errno;
    ::close(out[0]);
    ::close(out[1]);
    return ErrnoError("pipe2", err);
  }
  std::vector<char*> argv;
  argv.push_back(const_cast<char*>(program.c_str()));
  for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);

  posix_spawnattr_t attr;
  posix_spawn_file_actions_t actions;
  // Both Init* initialise their object even when they fail, so both are destroyed below.
  absl::Status status = InitSpawnAttr(attr);
  absl::Status actions_status = InitFileActions(actions, out[1], stderr_path);
  if (status.ok()) status = actions_status;
  pid_t pid = -1;
  if (status.ok()) {
    // glibc reports a failed exec (missing program) as posix_spawnp's result.
    if (int err = ::posix_spawnp(&pid, program.c_str(), &actions, &attr, argv.data(), environ); err != 0) {
      status = ErrnoError(absl::StrCat("cannot start ", program), err);
    }
  }
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  ::close(out[1]);  // the child holds its copy; EOF comes when it (and its children) close it
  if (!status.ok()) {
    for (int fd : {out[0], wake[0], wake[1]}) ::close(fd);
    return status;
  }
  return std::unique_ptr<ChildProcess>(new ChildProcess(pid, out[0], wake[0], wake[1]));
}

ChildProcess::ChildProcess(pid_t pid, int stdout_fd, int wake_read_fd, int wake_write_fd)
    : pid_(pid), stdout_fd_(stdout_fd), wake_read_fd_(wake_read_fd), wake_write_fd_(wake_write_fd) {
  reader_ = std::thread([this] { DrainStdout(); });
}

ChildProcess::~ChildProcess() {
  {
    absl::MutexLock lock(&wait_mu_);
    // The whole group, even after the child was reaped: a grandchild left
    // behind would hold the test's stdout or stderr open and keep ctest
    // waiting. Linux allocates no pid equal to a live group's id, so this
    // reaches only processes of our own group.
    ::kill(-pid_, SIGKILL);
    if (!TryReap()) {
      ::kill(pid_, SIGKILL);  // in case it left the group
      int wait_status = 0;
      while (::waitpid(pid_, &wait_status, 0) < 0 && errno == EINTR) {
      }
      exit_code_ = ExitCodeOf(wait_status);
    }
  }
  const char byte = 1;
  while (::write(wake_write_fd_, &byte, 1) < 0 && errno == EINTR) {
  }
  reader_.join();
  for (int fd : {stdout_fd_, wake_read_fd_, wake_write_fd_}) ::close(fd);
}

void ChildProcess::DrainStdout() {
  char buf[4096];
  while (true) {
    pollfd fds[2] = {{stdout_fd_, POLLIN, 0}, {wake_read_fd_, POLLIN, 0}};
    if (::poll(fds, 2, -1) < 0) {
      if (errno == EINTR) continue;
      break;
    }
    if (fds[1].revents != 0) break;
    const ssize_t n = ::read(stdout_fd_, buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    absl::MutexLock lock(&mu_);
    AppendOutput(buf, static_cast<size_t>(n));
  }
  absl::MutexLock lock(&mu_);
  if (!partial_.empty()) lines_.push_back(std::move(partial_));
  partial_.clear();
  eof_ = true;
}

void ChildProcess::AppendOutput(const char* data, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    if (data[i] == '\n') {
      lines_.push_back(std::move(partial_));
      partial_.clear();
    } else {
      partial_.push_back(data[i]);
    }
  }
}

std::string ChildProcess::LinesSeen() const {
  const size_t first = lines_.size() > kLinesInErrors ? lines_.size() - kLinesInErrors : 0;
  if (first == lines_.size()) return "(no stdout lines)";
  std::vector<std::string> tail(lines_.begin() + static_cast<ptrdiff_t>(first), lines_.end());
  return absl::StrCat("stdout lines seen", first > 0 ? " (last ones)" : "", ":\n  ", absl::StrJoin(tail, "\n  "));
}

absl::StatusOr<std::string> ChildProcess::WaitForLine(const std::string& prefix, absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  absl::MutexLock lock(&mu_);
  while (true) {
    while (next_line_ < lines_.size()) {
      const std::string& line = lines_[next_line_++];
      if (absl::StartsWith(line, prefix)) return line;
    }
    if (eof_) {
      return absl::FailedPreconditionError(absl::StrCat(
          "pid ", pid_, " closed stdout before printing a line starting with '", prefix, "'; ", LinesSeen()));
    }
    auto more = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return eof_ || next_line_ < lines_.size(); };
    if (!mu_.AwaitWithDeadline(absl::Condition(&more), deadline)) {
      return absl::DeadlineExceededError(absl::StrCat("pid ", pid_, " printed no line starting with '", prefix,
                                                      "' within ", absl::FormatDuration(timeout), "; ", LinesSeen()));
    }
  }
}

std::vector<std::string> ChildProcess::StdoutLines() const {
  absl::MutexLock lock(&mu_);
  return lines_;
}

bool ChildProcess::TryReap() {
  if (exit_code_.has_value()) return true;
  int wait_status = 0;
  pid_t r;
  do {
    r = ::waitpid(pid_, &wait_status, WNOHANG);
  } while (r < 0 && errno == EINTR);
  if (r != pid_) return false;
  exit_code_ = ExitCodeOf(wait_status);
  return true;
}

void ChildProcess::Signal(int sig) {
  absl::MutexLock lock(&wait_mu_);
  // Holding wait_mu_ keeps the pid from being reaped (and reused) meanwhile.
  if (!exit_code_.has_value()) ::kill(pid_, sig);
}

absl::StatusOr<int> ChildProcess::Wait(absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  absl::Duration pause = absl::Milliseconds(1);
  while (true) {
    {
      absl::MutexLock lock(&wait_mu_);
      if (TryReap()) return *exit_code_;
    }
    const absl::Duration left = deadline - absl::Now();
    if (left <= absl::ZeroDuration()) {
      return absl::DeadlineExceededError(
          absl::StrCat("pid ", pid_, " still running after ", absl::FormatDuration(timeout)));
    }
    // Poll with a growing pause: exits are noticed within ~50 ms without
    // spinning, and without a SIGCHLD handler that would meddle with the test.
    absl::SleepFor(std::min(pause, left));
    pause = std::min(pause * 2, absl::Milliseconds(50));
  }
}

bool ChildProcess::Running() {
  absl::MutexLock lock(&wait_mu_);
  return !TryReap();
}

}  // namespace kvfleet::cluster
