#include "sched/params.h"

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include <cmath>
#include <vector>

namespace kvroute::sched {

Params::Params(const YAML::Node& node, std::string path)
    : node_(std::make_unique<YAML::Node>(node)),
      resolved_(std::make_unique<YAML::Node>(YAML::NodeType::Map)),
      path_(std::move(path)) {}
Params::~Params() = default;

ConfigError Params::Error(std::string_view key, std::string_view what) const {
  return {fmt::format("{}.{}: {}", path_, key, what)};
}

std::expected<double, ConfigError> Params::Number(std::string_view key, double fallback, double min,
                                                  double max) {
  auto out = ReadNumber(key, fallback, min, max);
  // Shortest text that reads back as the same double ("0.8", not yaml-cpp's 17 digits).
  if (out) (*resolved_)[std::string(key)] = fmt::format("{}", *out);
  return out;
}

std::expected<double, ConfigError> Params::ReadNumber(std::string_view key, double fallback,
                                                      double min, double max) {
  Consume(key);
  if (!node_->IsMap()) return fallback;
  const YAML::Node v = (*node_)[std::string(key)];
  if (!v.IsDefined() || v.IsNull()) return fallback;
  double out = 0;
  if (!v.IsScalar() || !YAML::convert<double>::decode(v, out) || !std::isfinite(out)) {
    return std::unexpected(Error(key, "expected a finite number"));
  }
  if (out < min || out > max) {
    return std::unexpected(Error(key, fmt::format("{} is outside [{}, {}]", out, min, max)));
  }
  return out;
}

std::expected<std::string, ConfigError> Params::String(std::string_view key, std::string fallback) {
  auto out = ReadString(key, std::move(fallback));
  if (out) (*resolved_)[std::string(key)] = *out;
  return out;
}

std::expected<std::string, ConfigError> Params::ReadString(std::string_view key,
                                                           std::string fallback) {
  Consume(key);
  if (!node_->IsMap()) return fallback;
  const YAML::Node v = (*node_)[std::string(key)];
  if (!v.IsDefined() || v.IsNull()) return fallback;
  if (!v.IsScalar()) return std::unexpected(Error(key, "expected a string"));
  return v.Scalar();
}

std::expected<std::vector<std::string>, ConfigError> Params::StringList(std::string_view key) {
  Consume(key);
  std::vector<std::string> out;
  if (!node_->IsMap()) return out;
  const YAML::Node v = (*node_)[std::string(key)];
  if (!v.IsDefined() || v.IsNull()) return out;
  if (!v.IsSequence()) return std::unexpected(Error(key, "expected a list of strings"));
  for (const YAML::Node& item : v) {
    if (!item.IsScalar()) return std::unexpected(Error(key, "expected a list of strings"));
    out.push_back(item.Scalar());
  }
  (*resolved_)[std::string(key)] = out;
  return out;
}

std::expected<void, ConfigError> Params::RejectUnknownKeys() const {
  if (!node_->IsMap()) return {};
  for (const auto& kv : *node_) {
    const std::string key = kv.first.as<std::string>();
    if (!consumed_.contains(key)) return std::unexpected(Error(key, "unknown key"));
  }
  return {};
}

}  // namespace kvroute::sched
