// StopSignals: SIGINT/SIGTERM taken synchronously by the thread that waits for them.
//
// Construct it on the main thread before starting any other thread: the signals are blocked
// in the calling thread and so in every thread it starts later, so no handler ever runs on an
// I/O or engine thread. Wait() returns the signal that arrived; the caller then drains.
//
// Thread safety: construct and Wait on the main thread only.
#pragma once

#include <pthread.h>
#include <signal.h>

namespace kvroute {

class StopSignals {
 public:
  StopSignals() {
    sigemptyset(&set_);
    sigaddset(&set_, SIGINT);
    sigaddset(&set_, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &set_, nullptr);
  }
  StopSignals(const StopSignals&) = delete;
  StopSignals& operator=(const StopSignals&) = delete;

  // Blocks until SIGINT or SIGTERM; returns its number.
  int Wait() {
    int signal_number = 0;
    sigwait(&set_, &signal_number);
    return signal_number;
  }

 private:
  sigset_t set_;
};

}  // namespace kvroute
