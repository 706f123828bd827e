#include "client/blocking_http_client.h"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/use_future.hpp>
#include <thread>

#include "client/async_http_client.h"

namespace kvroute::client {

namespace asio = boost::asio;

class BlockingHttpClient::Impl {
 public:
  explicit Impl(ClientOptions options)
      : work_(asio::make_work_guard(ioc_)),
        client_(ioc_.get_executor(), std::move(options)),
        thread_([this] { ioc_.run(); }) {}
  ~Impl() {
    asio::post(ioc_, [this] { client_.CloseIdle(); });
    work_.reset();
    thread_.join();
  }

  // Runs `make()` (a coroutine) on the I/O thread and waits for its result.
  template <typename Make>
  auto Run(Make make) {
    return asio::co_spawn(ioc_, std::move(make), asio::use_future).get();
  }

  asio::io_context ioc_;
  asio::executor_work_guard<asio::io_context::executor_type> work_;
  AsyncHttpClient client_;
  std::thread thread_;  // last: starts after everything it uses exists
};

class BlockingStream::Impl {
 public:
  Impl(BlockingHttpClient::Impl* client, std::unique_ptr<ResponseStream> stream)
      : client_(client), stream_(std::move(stream)) {}
  ~Impl() {
    // Destroy the stream on the I/O thread: its socket belongs to that thread.
    std::shared_ptr<ResponseStream> s(std::move(stream_));
    asio::post(client_->ioc_, [s] {});
  }
  BlockingHttpClient::Impl* client_;
  std::unique_ptr<ResponseStream> stream_;
};

BlockingStream::BlockingStream(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
BlockingStream::~BlockingStream() = default;
int BlockingStream::status() const { return impl_->stream_->status(); }
const net::HeaderList& BlockingStream::headers() const { return impl_->stream_->headers(); }
std::expected<std::optional<std::string>, ClientError> BlockingStream::Next() {
  ResponseStream* s = impl_->stream_.get();
  return impl_->client_->Run(
      [s]() -> asio::awaitable<std::expected<std::optional<std::string>, ClientError>> {
        co_return co_await s->Next();
      });
}
void BlockingStream::Cancel() { impl_->stream_->Cancel(); }

BlockingHttpClient::BlockingHttpClient(ClientOptions options)
    : impl_(std::make_unique<Impl>(std::move(options))) {}
BlockingHttpClient::~BlockingHttpClient() = default;

std::expected<ClientResponse, ClientError> BlockingHttpClient::Send(ClientRequest request) {
  AsyncHttpClient* c = &impl_->client_;
  return impl_->Run([c, request = std::move(request)]() mutable
                    -> asio::awaitable<std::expected<ClientResponse, ClientError>> {
    co_return co_await c->Send(std::move(request));
  });
}

std::expected<std::unique_ptr<BlockingStream>, ClientError> BlockingHttpClient::Stream(
    ClientRequest request) {
  AsyncHttpClient* c = &impl_->client_;
  auto opened =
      impl_->Run([c, request = std::move(request)]() mutable
                 -> asio::awaitable<std::expected<std::unique_ptr<ResponseStream>, ClientError>> {
        co_return co_await c->Stream(std::move(request));
      });
  if (!opened) return std::unexpected(opened.error());
  return std::make_unique<BlockingStream>(
      std::make_unique<BlockingStream::Impl>(impl_.get(), std::move(*opened)));
}

std::uint64_t BlockingHttpClient::connections_opened() const {
  return impl_->client_.connections_opened();
}
std::size_t BlockingHttpClient::idle_connections() const {
  return impl_->client_.idle_connections();
}

}  // namespace kvroute::client
