// Producer-side helpers for answers that are not ready when a handler returns:
//   ChunkQueue   — a BodySource fed by Push()/Close() from any thread (SSE streams);
//   DeferredSlot — a DeferredResponse completed by Set() from any thread.
//
// Both hand pieces to the connection without blocking the producer: the engine thread of
// `kvroute sim` (or the proxy of `kvroute serve`) pushes, and the connection's coroutine
// pulls when the socket has taken the previous piece. Pieces queued while the connection
// was writing are coalesced into one write, so a slow reader gets fewer, larger writes.
//
// Bound: a ChunkQueue holds at most `max_buffered_bytes` unsent bytes. A reader that falls
// that far behind is treated as stuck: the queue cancels itself (the on_cancel callback
// runs, the producer aborts its work) instead of growing without limit.
//
// Ownership: shared_ptr, held by the producer and by the connection.
// Thread safety: every method may be called from any thread; callbacks (deliver, done,
// on_cancel) run on the calling thread without the internal lock held.
#pragma once

#include <cstddef>
#include <deque>
#include <functional>
#include <mutex>
#include <optional>
#include <string>

#include "net/http_types.h"

namespace kvroute::net {

class ChunkQueue final : public BodySource {
 public:
  static constexpr std::size_t kDefaultMaxBufferedBytes = 8u << 20;

  // on_cancel runs once, on the thread that cancels, when the consumer cancels (client gone,
  // server cutting) or the buffer bound is exceeded. Not run after Close().
  explicit ChunkQueue(std::function<void()> on_cancel = {},
                      std::size_t max_buffered_bytes = kDefaultMaxBufferedBytes);

  // Producer side. Push returns false (and drops the piece) once cancelled or closed.
  bool Push(std::string piece);
  void Close();
  bool cancelled() const;

  // BodySource.
  void Pull(Deliver deliver) override;
  void Cancel() override;

 private:
  void CancelLocked(std::unique_lock<std::mutex>& lock);

  const std::size_t max_buffered_bytes_;
  mutable std::mutex mu_;
  // Guarded by mu_.
  std::string buffered_;  // pieces not yet pulled, concatenated
  bool closed_ = false;
  bool cancelled_ = false;
  Deliver pending_;  // a Pull waiting for data
  std::function<void()> on_cancel_;
};

class DeferredSlot final : public DeferredResponse {
 public:
  explicit DeferredSlot(std::function<void()> on_cancel = {});

  // Producer side: the first Set wins; later ones (and Sets after Cancel) are ignored.
  void Set(HttpResponse response);
  bool cancelled() const;

  // DeferredResponse. A cancelled slot completes Wait with a 503.
  void Wait(Done done) override;
  void Cancel() override;

 private:
  mutable std::mutex mu_;
  // Guarded by mu_.
  std::optional<HttpResponse> value_;
  bool cancelled_ = false;
  bool delivered_ = false;
  Done pending_;
  std::function<void()> on_cancel_;
};

}  // namespace kvroute::net
