// Clock: the one source of "now" for code that must run both in real time (kvroute sim,
// kvroute serve) and in virtual time (kvroute simulate, unit tests).
//
// Thread safety: implementations must be safe to call from any thread.
#pragma once

#include <atomic>
#include <chrono>

#include "common/types.h"

namespace kvroute {

class Clock {
 public:
  virtual ~Clock() = default;
  // Monotonic time since an arbitrary epoch fixed at construction.
  virtual Nanos Now() const = 0;
};

// Real monotonic time, optionally running `speedup` times faster than the wall clock
// (kvroute sim --speedup N): simulated time = speedup × elapsed real time.
class SteadyClock final : public Clock {
 public:
  explicit SteadyClock(double speedup = 1.0)
      : start_(std::chrono::steady_clock::now()), speedup_(speedup) {}
  Nanos Now() const override {
    auto real = std::chrono::steady_clock::now() - start_;
    return std::chrono::duration_cast<Nanos>(real * speedup_);
  }
  double speedup() const { return speedup_; }
  // Converts a simulated duration into the real duration to wait for it.
  Nanos ToReal(Nanos simulated) const {
    return std::chrono::duration_cast<Nanos>(simulated / speedup_);
  }

 private:
  std::chrono::steady_clock::time_point start_;
  double speedup_;
};

// Virtual time that only moves when told to. For tests and the discrete-event simulator.
class ManualClock final : public Clock {
 public:
  Nanos Now() const override { return Nanos(now_.load(std::memory_order_acquire)); }
  void Set(Nanos t) { now_.store(t.count(), std::memory_order_release); }
  void Advance(Nanos d) { now_.fetch_add(d.count(), std::memory_order_acq_rel); }

 private:
  std::atomic<Nanos::rep> now_{0};
};

}  // namespace kvroute
