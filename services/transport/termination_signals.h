// SIGTERM / SIGINT as values a service's main loop waits for, instead of
// handlers that may only touch async-signal-safe state. Block() must run
// before any thread starts, so every thread inherits the blocked mask and
// only Wait() ever receives the signals.
//
//   TerminationSignals::Block();
//   ... start servers and threads ...
//   int sig = TerminationSignals::Wait();           // blocks
//   bool again = TerminationSignals::Poll(50ms);    // a second signal while draining
#pragma once

#include <chrono>

namespace kvfleet::transport {

class TerminationSignals {
 public:
  static void Block();
  // Blocks until SIGTERM or SIGINT arrives; returns its number.
  static int Wait();
  // True when SIGTERM or SIGINT arrives within `timeout`.
  static bool Poll(std::chrono::milliseconds timeout);
};

}  // namespace kvfleet::transport
