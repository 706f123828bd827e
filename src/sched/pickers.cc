#include "sched/pickers.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "sched/registry.h"

namespace kvroute::sched {
namespace {

// Row indices ordered by worker id: the canonical order every draw uses.
std::vector<std::size_t> ById(std::span<const PickRow> rows) {
  std::vector<std::size_t> order(rows.size());
  std::iota(order.begin(), order.end(), 0);
  std::ranges::sort(order,
                    [&](std::size_t a, std::size_t b) { return rows[a].worker < rows[b].worker; });
  return order;
}

PickResult Argmin(std::span<const PickRow> rows, PolicyState& state) {
  double best = rows[0].total_cost;
  for (const PickRow& r : rows) best = std::min(best, r.total_cost);
  std::vector<std::size_t> ties;
  for (std::size_t i : ById(rows)) {
    if (rows[i].total_cost == best) ties.push_back(i);
  }
  // Draw only when there is a choice, so a policy without ties consumes no randomness.
  const std::size_t pick = ties.size() == 1 ? ties[0] : ties[state.UniformIndex(ties.size())];
  return {pick, {}};
}

class ArgminPicker final : public Picker {
 public:
  std::string_view Name() const override { return "argmin"; }
  std::expected<PickResult, SchedError> Pick(std::span<const PickRow> rows,
                                             PolicyState& state) const override {
    return Argmin(rows, state);
  }
};

class SoftmaxPicker final : public Picker {
 public:
  explicit SoftmaxPicker(double temperature) : temperature_(temperature) {}
  std::string_view Name() const override { return "softmax"; }
  std::expected<PickResult, SchedError> Pick(std::span<const PickRow> rows,
                                             PolicyState& state) const override {
    if (temperature_ <= 0) return Argmin(rows, state);
    double lo = rows[0].total_cost;
    double hi = lo;
    for (const PickRow& r : rows) {
      lo = std::min(lo, r.total_cost);
      hi = std::max(hi, r.total_cost);
    }
    const double range = hi - lo;
    std::vector<double> p(rows.size());
    double sum = 0;
    for (std::size_t i = 0; i < rows.size(); ++i) {
      // Normalised to [0, 1], so the best row has weight exp(0) = 1 and the sum is >= 1:
      // no overflow or underflow to an all-zero distribution.
      const double norm = range > 0 ? (rows[i].total_cost - lo) / range : 0.0;
      p[i] = std::exp(-norm / temperature_);
      sum += p[i];
    }
    for (double& v : p) v /= sum;
    const double u = state.Uniform01();
    double acc = 0;
    const std::vector<std::size_t> order = ById(rows);
    std::size_t pick = order.back();
    for (std::size_t i : order) {
      acc += p[i];
      if (u < acc) {
        pick = i;
        break;
      }
    }
    return PickResult{pick, std::move(p)};
  }

 private:
  double temperature_;
};

class RandomPicker final : public Picker {
 public:
  std::string_view Name() const override { return "random"; }
  std::expected<PickResult, SchedError> Pick(std::span<const PickRow> rows,
                                             PolicyState& state) const override {
    const std::vector<std::size_t> order = ById(rows);
    return PickResult{order[state.UniformIndex(order.size())],
                      std::vector<double>(rows.size(), 1.0 / rows.size())};
  }
};

class RoundRobinPicker final : public Picker {
 public:
  std::string_view Name() const override { return "round_robin"; }
  std::expected<PickResult, SchedError> Pick(std::span<const PickRow> rows,
                                             PolicyState& state) const override {
    const std::vector<std::size_t> order = ById(rows);
    std::size_t pick = order.front();  // wrap around (or first pick ever)
    if (state.last_round_robin) {
      for (std::size_t i : order) {
        if (rows[i].worker > *state.last_round_robin) {
          pick = i;
          break;
        }
      }
    }
    state.last_round_robin = rows[pick].worker;
    return PickResult{pick, {}};
  }
};

}  // namespace

std::shared_ptr<const Picker> NewArgminPicker() { return std::make_shared<const ArgminPicker>(); }
std::shared_ptr<const Picker> NewSoftmaxPicker(double temperature) {
  return std::make_shared<const SoftmaxPicker>(temperature);
}
std::shared_ptr<const Picker> NewRandomPicker() { return std::make_shared<const RandomPicker>(); }
std::shared_ptr<const Picker> NewRoundRobinPicker() {
  return std::make_shared<const RoundRobinPicker>();
}

// The plug-ins' YAML options (sched/registry.h's format), parsed beside the plug-ins they build.
void RegisterBuiltinPickers(Registry& registry) {
  using Unexpected = std::unexpected<ConfigError>;
  using Made = std::expected<std::shared_ptr<const Picker>, ConfigError>;
  [[maybe_unused]] constexpr double kInf = std::numeric_limits<double>::infinity();
  registry.AddPicker("argmin", [](Params&) -> Made { return NewArgminPicker(); });
  registry.AddPicker("random", [](Params&) -> Made { return NewRandomPicker(); });
  registry.AddPicker("round_robin", [](Params&) -> Made { return NewRoundRobinPicker(); });
  registry.AddPicker("softmax", [](Params& p) -> Made {
    auto t = p.Number("temperature", 0.0, 0, kInf);
    if (!t) return Unexpected(t.error());
    return NewSoftmaxPicker(*t);
  });
}

}  // namespace kvroute::sched
