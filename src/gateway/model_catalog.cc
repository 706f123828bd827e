#include "gateway/model_catalog.h"

#include <boost/json.hpp>

namespace kvroute::gateway {

std::expected<std::vector<api::ModelCard>, std::string> ParseModelList(std::string_view body) {
  boost::system::error_code ec;
  boost::json::value v = boost::json::parse(body, ec);
  if (ec || !v.is_object()) return std::unexpected("not a JSON object");
  const auto* data = v.as_object().if_contains("data");
  if (data == nullptr || !data->is_array()) return std::unexpected("no 'data' list");
  std::vector<api::ModelCard> cards;
  for (const auto& entry : data->as_array()) {
    if (!entry.is_object()) continue;
    const auto& o = entry.as_object();
    const auto* id = o.if_contains("id");
    if (id == nullptr || !id->is_string()) continue;
    api::ModelCard card;
    card.id = std::string(id->as_string());
    if (const auto* c = o.if_contains("created"); c && c->is_int64()) card.created = c->as_int64();
    if (const auto* ob = o.if_contains("owned_by"); ob && ob->is_string()) {
      card.owned_by = std::string(ob->as_string());
    }
    if (const auto* r = o.if_contains("root"); r && r->is_string()) {
      card.root = std::string(r->as_string());
    }
    if (const auto* p = o.if_contains("parent"); p && p->is_string()) {
      card.parent = std::string(p->as_string());
    }
    if (const auto* m = o.if_contains("max_model_len"); m && m->is_int64()) {
      card.max_model_len = m->as_int64();
    }
    cards.push_back(std::move(card));
  }
  return cards;
}

void ModelCatalog::SetConfigured(WorkerId worker, const std::vector<std::string>& models) {
  std::lock_guard lock(mu_);
  if (cards_.contains(worker)) return;
  std::vector<api::ModelCard> cards;
  for (const auto& m : models) cards.push_back(api::ModelCard{.id = m, .owned_by = "kvroute"});
  cards_[worker] = std::move(cards);
}

void ModelCatalog::Update(WorkerId worker, std::vector<api::ModelCard> cards) {
  std::lock_guard lock(mu_);
  cards_[worker] = std::move(cards);
}

void ModelCatalog::Remove(WorkerId worker) {
  std::lock_guard lock(mu_);
  cards_.erase(worker);
}

std::optional<std::int64_t> ModelCatalog::MaxModelLen(std::string_view model) const {
  std::lock_guard lock(mu_);
  std::optional<std::int64_t> best;
  for (const auto& [worker, cards] : cards_) {
    for (const auto& c : cards) {
      if (c.id != model || c.max_model_len <= 0) continue;
      if (!best || c.max_model_len < *best) best = c.max_model_len;
    }
  }
  return best;
}

bool ModelCatalog::IsAdapter(std::string_view model) const {
  std::lock_guard lock(mu_);
  for (const auto& [worker, cards] : cards_) {
    for (const auto& c : cards) {
      if (c.id == model && c.parent && !c.parent->empty() && *c.parent != c.id) return true;
    }
  }
  return false;
}

std::vector<api::ModelCard> ModelCatalog::Cards(const std::set<WorkerId>& workers) const {
  std::lock_guard lock(mu_);
  std::map<std::string, api::ModelCard> by_id;
  for (const auto& [worker, cards] : cards_) {
    if (!workers.contains(worker)) continue;
    for (const auto& c : cards) by_id.emplace(c.id, c);
  }
  std::vector<api::ModelCard> out;
  for (auto& [id, card] : by_id) out.push_back(std::move(card));
  return out;
}

}  // namespace kvroute::gateway
