#include "net/body_queue.h"

#include <utility>

namespace kvroute::net {

ChunkQueue::ChunkQueue(std::function<void()> on_cancel, std::size_t max_buffered_bytes)
    : max_buffered_bytes_(max_buffered_bytes), on_cancel_(std::move(on_cancel)) {}

bool ChunkQueue::Push(std::string piece) {
  std::unique_lock lock(mu_);
  if (cancelled_ || closed_) return false;
  if (pending_) {
    // The connection is idle and waiting: hand the piece over directly.
    Deliver deliver = std::exchange(pending_, nullptr);
    lock.unlock();
    deliver(std::move(piece));
    return true;
  }
  if (buffered_.size() + piece.size() > max_buffered_bytes_) {
    CancelLocked(lock);  // the reader is stuck; stop the producer rather than grow
    return false;
  }
  buffered_ += piece;
  return true;
}

void ChunkQueue::Close() {
  std::unique_lock lock(mu_);
  if (closed_ || cancelled_) return;
  closed_ = true;
  on_cancel_ = nullptr;  // finished normally: a later Cancel has nothing to stop
  if (pending_ && buffered_.empty()) {
    Deliver deliver = std::exchange(pending_, nullptr);
    lock.unlock();
    deliver(std::nullopt);
  }
}

bool ChunkQueue::cancelled() const {
  std::lock_guard lock(mu_);
  return cancelled_;
}

void ChunkQueue::Pull(Deliver deliver) {
  std::unique_lock lock(mu_);
  if (!buffered_.empty() && !cancelled_) {
    std::string piece = std::exchange(buffered_, {});
    lock.unlock();
    deliver(std::move(piece));
    return;
  }
  if (closed_ || cancelled_) {
    lock.unlock();
    deliver(std::nullopt);
    return;
  }
  pending_ = std::move(deliver);
}

void ChunkQueue::Cancel() {
  std::unique_lock lock(mu_);
  CancelLocked(lock);
}

void ChunkQueue::CancelLocked(std::unique_lock<std::mutex>& lock) {
  if (cancelled_) return;
  cancelled_ = true;
  buffered_.clear();
  Deliver deliver = std::exchange(pending_, nullptr);
  std::function<void()> on_cancel = std::exchange(on_cancel_, nullptr);
  lock.unlock();
  if (deliver) deliver(std::nullopt);
  if (on_cancel) on_cancel();
}

DeferredSlot::DeferredSlot(std::function<void()> on_cancel) : on_cancel_(std::move(on_cancel)) {}

void DeferredSlot::Set(HttpResponse response) {
  std::unique_lock lock(mu_);
  if (value_ || cancelled_) return;
  on_cancel_ = nullptr;
  if (pending_) {
    Done done = std::exchange(pending_, nullptr);
    delivered_ = true;
    value_ = HttpResponse{};
    lock.unlock();
    done(std::move(response));
    return;
  }
  value_ = std::move(response);
}

bool DeferredSlot::cancelled() const {
  std::lock_guard lock(mu_);
  return cancelled_;
}

void DeferredSlot::Wait(Done done) {
  std::unique_lock lock(mu_);
  if (value_ && !delivered_) {
    delivered_ = true;
    HttpResponse response = std::move(*value_);
    lock.unlock();
    done(std::move(response));
    return;
  }
  if (cancelled_) {
    delivered_ = true;
    lock.unlock();
    done(TextResponse(503, "request cancelled\n"));
    return;
  }
  pending_ = std::move(done);
}

void DeferredSlot::Cancel() {
  std::unique_lock lock(mu_);
  if (cancelled_ || value_) return;
  cancelled_ = true;
  Done done = std::exchange(pending_, nullptr);
  std::function<void()> on_cancel = std::exchange(on_cancel_, nullptr);
  if (done) delivered_ = true;
  lock.unlock();
  if (done) done(TextResponse(503, "request cancelled\n"));
  if (on_cancel) on_cancel();
}

}  // namespace kvroute::net
