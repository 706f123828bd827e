// EventQueue: the discrete-event simulator's agenda — a min-heap of events ordered by virtual
// time, ties broken by a sequence number assigned at Push. Two runs that push the same events
// in the same order pop them in the same order, so a simulation is a deterministic function
// of its inputs and seed (no ordering by address, no unordered containers).
//
// Events are small fixed-size records (kind + two integer operands); payloads that do not fit
// (a KV event batch) live in the simulator and the operand indexes them.
//
// Ownership: owns its events. Thread safety: none (the simulator's one thread).
#pragma once

#include <cstdint>
#include <queue>
#include <vector>

#include "common/types.h"

namespace kvroute::simulate {

enum class EventKind : std::uint8_t {
  kArrival,      // a = request slot index
  kStepEnd,      // a = worker, b = worker epoch (stale after a failure)
  kKvDelivery,   // a = batch slot, b = worker epoch
  kScrape,       // periodic metrics scrape of every worker
  kFleetChange,  // a = index into the fleet schedule
  kWake,         // a = worker, b = worker epoch: its engine's NextTimedEvent (P/D)
};

struct Event {
  Nanos time{0};
  std::uint64_t seq = 0;  // push order; breaks ties in time
  EventKind kind = EventKind::kArrival;
  std::uint32_t a = 0;
  std::uint64_t b = 0;
};

class EventQueue {
 public:
  // Schedules an event; returns its sequence number.
  std::uint64_t Push(Nanos time, EventKind kind, std::uint32_t a = 0, std::uint64_t b = 0) {
    const std::uint64_t seq = next_seq_++;
    heap_.push(Event{time, seq, kind, a, b});
    return seq;
  }
  bool empty() const { return heap_.empty(); }
  std::size_t size() const { return heap_.size(); }
  // REQUIRES: !empty().
  const Event& top() const { return heap_.top(); }
  // Removes and returns the earliest event (lowest sequence number among equal times).
  // REQUIRES: !empty().
  Event Pop() {
    Event e = heap_.top();
    heap_.pop();
    return e;
  }

 private:
  struct Later {
    bool operator()(const Event& x, const Event& y) const {
      return x.time != y.time ? x.time > y.time : x.seq > y.seq;
    }
  };
  std::priority_queue<Event, std::vector<Event>, Later> heap_;
  std::uint64_t next_seq_ = 0;
};

}  // namespace kvroute::simulate
