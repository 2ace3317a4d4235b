#include "services/transport/termination_signals.h"

#include <pthread.h>
#include <signal.h>

#include <cerrno>
#include <ctime>

namespace kvfleet::transport {
namespace {

sigset_t TerminationSet() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  return set;
}

}  // namespace

void TerminationSignals::Block() {
  const sigset_t set = TerminationSet();
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
}

int TerminationSignals::Wait() {
  const sigset_t set = TerminationSet();
  int sig = 0;
  while (sigwait(&set, &sig) != 0) {
  }
  return sig;
}

bool TerminationSignals::Poll(std::chrono::milliseconds timeout) {
  const sigset_t set = TerminationSet();
  const auto secs = std::chrono::duration_cast<std::chrono::seconds>(timeout);
  timespec ts{.tv_sec = static_cast<time_t>(secs.count()),
              .tv_nsec = static_cast<long>(std::chrono::nanoseconds(timeout - secs).count())};
  return sigtimedwait(&set, nullptr, &ts) > 0;
}

}  // namespace kvfleet::transport
