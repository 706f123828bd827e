// ModelCatalog: what each worker says it serves (its GET /v1/models answer), so that kvroute
// can answer /v1/models from the healthy workers and knows each model's context length
// (max_model_len) for the context-length check before routing.
//
// Adapters: a card with a parent is a LoRA adapter of that base model; its name is then an
// extra key of every block of the requests for it (kv/keys/extra_keys.h).
//
// Until a worker answered, its configured model names stand in (no max_model_len: the check
// is skipped and the worker enforces it).
//
// Ownership: plain state. Thread safety: every method takes one internal mutex.
#pragma once

#include <cstdint>
#include <expected>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "api/responses.h"
#include "common/types.h"

namespace kvroute::gateway {

// Parses a /v1/models body into cards. Error text for a body that is not a model list.
std::expected<std::vector<api::ModelCard>, std::string> ParseModelList(std::string_view body);

class ModelCatalog {
 public:
  // The worker's configured names (used until it answers /v1/models).
  void SetConfigured(WorkerId worker, const std::vector<std::string>& models);
  void Update(WorkerId worker, std::vector<api::ModelCard> cards);
  void Remove(WorkerId worker);

  // Smallest max_model_len any worker reported for `model` (the binding limit), if any did.
  std::optional<std::int64_t> MaxModelLen(std::string_view model) const;

  // True when some worker lists `model` as a LoRA adapter: a card whose `parent` (the base
  // model) is set and differs from its id, as vLLM lists the adapters of --lora-modules.
  bool IsAdapter(std::string_view model) const;

  // One card per model id over `workers` (first reporter's card wins; ids sorted).
  std::vector<api::ModelCard> Cards(const std::set<WorkerId>& workers) const;

 private:
  mutable std::mutex mu_;
  std::map<WorkerId, std::vector<api::ModelCard>> cards_;  // guarded by mu_
};

}  // namespace kvroute::gateway
