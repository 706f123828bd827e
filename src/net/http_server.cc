// HttpServer implementation: the listener, dispatch and lifecycle (Start, StopAccepting,
// Shutdown). One connection lives in http_session.cc, the error answers in http_errors.cc;
// http_server.h has the contract and README.md the state machine.
#include "net/http_server.h"

#include <spdlog/spdlog.h>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/post.hpp>
#include <future>
#include <vector>

#include "net/http_server_impl.h"

namespace kvroute::net {

// The states of servers whose Shutdown gave up on a connection (see Shutdown). Reachable from
// a global, so LeakSanitizer does not report them.
void HttpServer::KeepForever(std::shared_ptr<Impl> impl) {
  static std::mutex mu;
  static auto* kept = new std::vector<std::shared_ptr<Impl>>();
  std::lock_guard lock(mu);
  kept->push_back(std::move(impl));
}

asio::awaitable<void> HttpServer::Impl::AcceptLoop() {
  Impl* self = this;
  for (;;) {
    // Connections are spread over the lanes round robin; each stays on its lane for life.
    const int lane = lanes_->NextLane();
    Executor exec = lanes_->context(lane).get_executor();
    auto [ec, socket] = co_await acceptor_.async_accept(exec, kNoThrow);
    if (ec) {
      if (ec == asio::error::operation_aborted || !acceptor_.is_open()) co_return;
      spdlog::warn("http: accept failed: {}", ec.message());
      continue;
    }
    if (draining_) continue;  // socket closes on scope exit
    socket.set_option(tcp::no_delay(true), ec);
    std::shared_ptr<Session> session;
    {
      std::lock_guard lock(mu_);
      std::uint64_t id = next_session_id_++;
      session = std::make_shared<Session>(self, std::move(socket), lane, exec, id);
      sessions_[id] = session;
    }
    asio::co_spawn(session->executor(), session->Run(), [self, session](std::exception_ptr e) {
      if (e) {
        try {
          std::rethrow_exception(e);
        } catch (const std::exception& ex) {
          spdlog::warn("http: connection dropped: {}", ex.what());
        }
      }
      std::lock_guard lock(self->mu_);
      self->sessions_.erase(session->id());
      self->cv_.notify_all();
    });
  }
}

// Takes the request by rvalue and passes it on: the handler owns it (no body copy).
HandlerResult HttpServer::Impl::Dispatch(HttpRequest&& request) const {
  auto path_it = routes_.find(request.path);
  if (path_it == routes_.end()) {
    return ErrorJson(404, "NotFoundError", "Not Found");
  }
  auto method_it = path_it->second.find(request.method);
  if (method_it == path_it->second.end()) {
    HttpResponse r = ErrorJson(405, "MethodNotAllowed", "Method Not Allowed");
    std::string allow;
    for (const auto& [method, h] : path_it->second) allow += (allow.empty() ? "" : ", ") + method;
    r.headers.emplace_back("Allow", allow);
    return r;
  }
  try {
    return method_it->second(std::move(request));
  } catch (const std::exception& e) {
    // Handlers must not throw; if one does, only this request fails and nothing leaks. The
    // route's own key names it: the handler may have moved from the request.
    spdlog::error("http: handler for {} {} threw: {}", method_it->first, path_it->first, e.what());
    return ErrorJson(500, "InternalServerError", "Internal Server Error");
  }
}

template <typename Fn>
void HttpServer::Impl::ForEachSession(Fn fn) {
  std::vector<std::shared_ptr<Session>> live;
  {
    std::lock_guard lock(mu_);
    for (auto& [id, weak] : sessions_) {
      if (auto s = weak.lock()) live.push_back(std::move(s));
    }
  }
  for (auto& s : live) asio::post(s->executor(), [s, fn] { fn(*s); });
}

HttpServer::HttpServer(ServerOptions options) : impl_(std::make_shared<Impl>(std::move(options))) {}

HttpServer::~HttpServer() { Shutdown(std::chrono::milliseconds(0)); }

void HttpServer::Handle(std::string method, std::string path, Handler handler) {
  impl_->routes_[std::move(path)][std::move(method)] = std::move(handler);
}

std::expected<void, std::string> HttpServer::Start() {
  Impl& s = *impl_;
  std::lock_guard life(s.lifecycle_mu_);
  if (s.started_.exchange(true)) return std::unexpected("server already started");
  beast::error_code ec;
  auto address = asio::ip::make_address(s.options_.host, ec);
  if (ec) {
    s.started_ = false;  // nothing runs: Shutdown has nothing to stop
    return std::unexpected("bad listen address '" + s.options_.host + "': " + ec.message());
  }
  tcp::endpoint endpoint(address, s.options_.port);
  std::string where = s.options_.host + ":" + std::to_string(s.options_.port);
  s.acceptor_.open(endpoint.protocol(), ec);
  if (!ec) s.acceptor_.set_option(asio::socket_base::reuse_address(true), ec);
  if (!ec) s.acceptor_.bind(endpoint, ec);
  if (!ec) s.acceptor_.listen(asio::socket_base::max_listen_connections, ec);
  if (ec) {
    beast::error_code ignored;
    s.acceptor_.close(ignored);
    s.started_ = false;
    return std::unexpected("cannot listen on " + where + ": " + ec.message());
  }
  s.port_ = s.acceptor_.local_endpoint().port();
  {
    std::lock_guard lock(s.mu_);
    s.accept_loop_running_ = true;
  }
  // Shutdown waits for the loop to end, so that no frame of it is left queued when the
  // threads stop.
  asio::co_spawn(s.accept_exec_, s.AcceptLoop(), [impl = impl_.get()](std::exception_ptr e) {
    if (e) spdlog::error("http: accept loop ended by an exception; no new connections");
    std::lock_guard lock(impl->mu_);
    impl->accept_loop_running_ = false;
    impl->cv_.notify_all();
  });
  return {};
}

std::uint16_t HttpServer::port() const { return impl_->port_; }

void HttpServer::StopAccepting() {
  std::lock_guard life(impl_->lifecycle_mu_);
  impl_->StopAcceptingLocked();
}

void HttpServer::Impl::StopAcceptingLocked() {
  if (draining_.exchange(true)) return;
  if (!started_ || stopped_) return;
  // Shared with the posted close: should the wait below give up, a late close still finds
  // its promise. The wait is bounded in case every pool thread is stuck in a handler.
  auto closed = std::make_shared<std::promise<void>>();
  asio::post(accept_exec_, [this, closed] {
    beast::error_code ec;
    acceptor_.close(ec);
    closed->set_value();
  });
  closed->get_future().wait_for(std::chrono::seconds(5));
  // Every session AcceptLoop created is in sessions_ by now: it runs on lane 0, so
  // each of its steps finished before the close ran, and steps after it accept nothing.
  ForEachSession([](Session& session) { session.CloseIfIdle(); });
}

std::size_t HttpServer::Shutdown(std::chrono::milliseconds grace) {
  Impl& s = *impl_;
  std::lock_guard life(s.lifecycle_mu_);
  if (!s.started_ || s.stopped_.load()) return 0;
  s.StopAcceptingLocked();
  std::size_t cut = 0;
  {
    std::unique_lock lock(s.mu_);
    s.cv_.wait_for(lock, grace, [&s] { return s.in_flight_ == 0; });
    cut = s.in_flight_;
  }
  s.ForEachSession([](Impl::Session& session) { session.Cut(); });
  {
    // Cut connections finish within a few scheduler turns; bounded in case a producer
    // ignores Cancel.
    std::unique_lock lock(s.mu_);
    const bool ended = s.cv_.wait_for(
        lock, s.options_.cut_wait, [&s] { return s.sessions_.empty() && !s.accept_loop_running_; });
    if (!ended) {
      // A connection outlived the wait (its producer ignored Cancel, or its lane is stuck in
      // a handler). It will resume whenever its producer answers: on shared lanes, after this
      // server is gone, reaching this state (heap-use-after-free under ASan when it was
      // freed with the HttpServer). Keep the state for the process's life instead: a
      // bounded leak per such Shutdown, and only when a producer breaks its contract.
      spdlog::error(
          "http: {} connection(s) did not end within {} ms of being cut; keeping "
          "the server's state for them",
          s.sessions_.size(), s.options_.cut_wait.count());
      KeepForever(impl_);
    }
  }
  s.stopped_ = true;
  // Shared lanes keep running for their other users (the proxy); their owner stops them.
  if (s.owns_lanes_) s.lanes_->Stop();
  return cut;
}

std::size_t HttpServer::InFlight() const {
  std::lock_guard lock(impl_->mu_);
  return impl_->in_flight_;
}

}  // namespace kvroute::net
