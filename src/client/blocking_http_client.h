// BlockingHttpClient: a synchronous facade over AsyncHttpClient for tools and tests.
//
// It owns one io_context and one I/O thread; each call runs the coroutine there and waits for
// it. Streams keep their backpressure: BlockingStream::Next() reads the next piece only when
// called.
//
// Ownership: the client owns its thread; a BlockingStream must not outlive its client.
// Thread safety: Send and Stream may be called from several threads at once (they run
// concurrently on the I/O thread). A BlockingStream is used by one thread at a time; Cancel()
// may be called from any thread.
#pragma once

#include <cstdint>
#include <expected>
#include <memory>
#include <optional>
#include <string>

#include "client/client_types.h"

namespace kvroute::client {

class BlockingStream {
 public:
  class Impl;
  explicit BlockingStream(std::unique_ptr<Impl> impl);
  ~BlockingStream();  // closes the connection unless the body was read to its end
  BlockingStream(const BlockingStream&) = delete;
  BlockingStream& operator=(const BlockingStream&) = delete;

  int status() const;
  const net::HeaderList& headers() const;
  // As ResponseStream::Next: a piece, nullopt at the end, or an error.
  std::expected<std::optional<std::string>, ClientError> Next();
  void Cancel();

 private:
  std::unique_ptr<Impl> impl_;
};

class BlockingHttpClient {
 public:
  explicit BlockingHttpClient(ClientOptions options = {});
  ~BlockingHttpClient();  // closes idle connections and joins the I/O thread
  BlockingHttpClient(const BlockingHttpClient&) = delete;
  BlockingHttpClient& operator=(const BlockingHttpClient&) = delete;

  std::expected<ClientResponse, ClientError> Send(ClientRequest request);
  std::expected<std::unique_ptr<BlockingStream>, ClientError> Stream(ClientRequest request);

  std::uint64_t connections_opened() const;
  std::size_t idle_connections() const;

  class Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace kvroute::client
