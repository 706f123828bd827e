#include "sim/side_channel.h"

#include <spdlog/spdlog.h>

#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>
#include <memory>

#include "net/body_queue.h"

namespace kvroute::sim {
namespace {

using net::HandlerResult;
using net::HttpRequest;

net::HttpResponse Error(int status, const std::string& message) {
  return net::JsonResponse(status, boost::json::serialize(boost::json::object{{"error", message}}));
}

struct Message {
  std::string engine_id;
  std::string request_id;
  boost::json::object body;
};

// The fields every side-channel message carries.
std::expected<Message, std::string> ParseMessage(const std::string& text) {
  boost::system::error_code ec;
  boost::json::value v = boost::json::parse(text, ec);
  if (ec || !v.is_object()) return std::unexpected("the body must be a JSON object");
  Message m;
  m.body = std::move(v.as_object());
  const auto* engine = m.body.if_contains("engine_id");
  const auto* request = m.body.if_contains("request_id");
  if (engine == nullptr || !engine->is_string() || request == nullptr || !request->is_string()) {
    return std::unexpected("engine_id and request_id must be strings");
  }
  m.engine_id = std::string(engine->get_string());
  m.request_id = std::string(request->get_string());
  return m;
}

std::int64_t IntOr(const boost::json::object& o, std::string_view key, std::int64_t fallback) {
  const auto* v = o.if_contains(key);
  return v != nullptr && v->is_int64() ? v->get_int64() : fallback;
}

HandlerResult Claim(const SideChannelContext& ctx, const HttpRequest& request) {
  auto m = ParseMessage(request.body);
  if (!m) return Error(400, m.error());
  if (m->engine_id != ctx.engine_id) {
    return Error(404, "unknown engine id '" + m->engine_id + "' (this is '" + ctx.engine_id + "')");
  }
  std::vector<std::int32_t> ids;
  if (const auto* v = m->body.if_contains("block_ids"); v != nullptr && v->is_array()) {
    for (const auto& id : v->get_array()) {
      if (!id.is_int64()) return Error(400, "block_ids must be integers");
      ids.push_back(static_cast<std::int32_t>(id.get_int64()));
    }
  }
  const std::int64_t prompt = IntOr(m->body, "num_prompt_tokens", -1);
  const std::int64_t block_size = IntOr(m->body, "block_size", -1);
  auto slot = std::make_shared<net::DeferredSlot>();
  const SideChannelContext c = ctx;
  ctx.loop->RunOnLoop([slot, c, id = m->request_id, ids = std::move(ids), prompt, block_size](
                          engine::Engine& engine, Nanos) {
    const std::optional<engine::PinnedKv> pinned = engine.FindPinned(id);
    if (!pinned) {
      slot->Set(Error(404, "request '" + id + "' holds no pinned KV on engine '" + c.engine_id +
                               "' (unknown, already read, or expired)"));
      return;
    }
    if (block_size != c.block_size) {
      slot->Set(Error(409, "block size " + std::to_string(block_size) + " differs from the " +
                               "prefill engine's " + std::to_string(c.block_size)));
    } else if (pinned->block_ids != ids) {
      slot->Set(Error(409, "remote_block_ids do not match the blocks pinned for request '" + id +
                               "'"));
    } else if (prompt != pinned->num_prompt_tokens) {
      slot->Set(Error(409, "the decode prompt has " + std::to_string(prompt) +
                               " tokens; the prefill of request '" + id + "' had " +
                               std::to_string(pinned->num_prompt_tokens)));
    } else {
      slot->Set(net::JsonResponse(
          200, boost::json::serialize(boost::json::object{
                   {"engine_id", c.engine_id},
                   {"tp_size", c.tp_size},
                   {"block_size", c.block_size},
                   {"num_blocks", pinned->block_ids.size()},
               })));
    }
  });
  return std::shared_ptr<net::DeferredResponse>(std::move(slot));
}

HandlerResult Release(const SideChannelContext& ctx, const HttpRequest& request) {
  auto m = ParseMessage(request.body);
  if (!m) return Error(400, m.error());
  if (m->engine_id != ctx.engine_id) {
    return Error(404, "unknown engine id '" + m->engine_id + "' (this is '" + ctx.engine_id + "')");
  }
  const std::int64_t read = IntOr(m->body, "blocks_read", 0);
  auto slot = std::make_shared<net::DeferredSlot>();
  const SideChannelContext c = ctx;
  ctx.loop->RunOnLoop([slot, c, id = m->request_id, read](engine::Engine& engine, Nanos) {
    if (!engine.ReleasePinned(id)) {
      slot->Set(Error(404, "request '" + id + "' holds no pinned KV (already freed or expired)"));
      return;
    }
    spdlog::debug("P/D: request {} released by its decoder ({} block(s) read)", id, read);
    if (c.metrics != nullptr) c.metrics->released_reqs.Increment();
    slot->Set(net::JsonResponse(200, R"({"released":true})"));
  });
  return std::shared_ptr<net::DeferredResponse>(std::move(slot));
}

}  // namespace

void RegisterSideChannelHandlers(const SideChannelContext& ctx, net::HttpServer& server) {
  server.Handle("POST", "/kv/claim", [ctx](const HttpRequest& r) { return Claim(ctx, r); });
  server.Handle("POST", "/kv/release", [ctx](const HttpRequest& r) { return Release(ctx, r); });
}

}  // namespace kvroute::sim
