// MapReader: reads one YAML mapping of the serve configuration, remembering which keys were
// read so the rest are reported as unknown; errors name the key by its path. Private to the
// configuration's .cc files (gateway/config.cc and the sections parsed apart from it).
//
// Thread safety: one reader per mapping and thread.
#pragma once

#include <yaml-cpp/yaml.h>

#include <cmath>
#include <expected>
#include <set>
#include <sstream>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

namespace kvroute::gateway::config_detail {

using Error = std::unexpected<std::string>;

inline std::string Join(std::string_view path, std::string_view key) {
  return path.empty() ? std::string(key) : std::string(path) + "." + std::string(key);
}

// Reads one map, remembering which keys were read so that the rest are reported.
class MapReader {
 public:
  MapReader(const YAML::Node& node, std::string path) : node_(node), path_(std::move(path)) {}

  std::expected<void, std::string> CheckIsMap() const {
    if (node_.IsNull() || node_.IsMap()) return {};
    return Error(Where() + ": must be a mapping");
  }

  YAML::Node Get(const std::string& key) {
    seen_.insert(key);
    return node_.IsMap() ? node_[key] : YAML::Node();
  }

  std::expected<void, std::string> String(const std::string& key, std::string* out) {
    YAML::Node n = Get(key);
    if (!n || n.IsNull()) return {};
    if (!n.IsScalar()) return Error(Join(path_, key) + ": must be a string");
    *out = n.Scalar();
    return {};
  }

  std::expected<void, std::string> Bool(const std::string& key, bool* out) {
    YAML::Node n = Get(key);
    if (!n || n.IsNull()) return {};
    bool v = false;
    if (!n.IsScalar() || !YAML::convert<bool>::decode(n, v)) {
      return Error(Join(path_, key) + ": must be true or false");
    }
    *out = v;
    return {};
  }

  template <typename T>
  std::expected<void, std::string> Number(const std::string& key, T* out, double min, double max) {
    YAML::Node n = Get(key);
    if (!n || n.IsNull()) return {};
    double v = 0;
    if (!n.IsScalar() || !YAML::convert<double>::decode(n, v) || !std::isfinite(v)) {
      return Error(Join(path_, key) + ": must be a number");
    }
    if (v < min || v > max) {
      std::ostringstream os;
      os << Join(path_, key) << ": " << n.Scalar() << " is out of range [" << min << ", " << max
         << "]";
      return Error(os.str());
    }
    if constexpr (std::is_integral_v<T>) {
      if (v != std::floor(v)) return Error(Join(path_, key) + ": must be an integer");
    }
    *out = static_cast<T>(v);
    return {};
  }

  std::expected<void, std::string> StringList(const std::string& key,
                                              std::vector<std::string>* out) {
    YAML::Node n = Get(key);
    if (!n || n.IsNull()) return {};
    if (n.IsScalar()) {
      *out = {n.Scalar()};
      return {};
    }
    if (!n.IsSequence()) return Error(Join(path_, key) + ": must be a list of strings");
    out->clear();
    for (std::size_t i = 0; i < n.size(); ++i) {
      if (!n[i].IsScalar()) {
        return Error(Join(path_, key) + "[" + std::to_string(i) + "]: must be a string");
      }
      out->push_back(n[i].Scalar());
    }
    return {};
  }

  std::expected<void, std::string> RejectUnknown() const {
    if (!node_.IsMap()) return {};
    for (const auto& kv : node_) {
      std::string key = kv.first.Scalar();
      if (!seen_.contains(key)) return Error(Join(path_, key) + ": unknown key");
    }
    return {};
  }

  const std::string& path() const { return path_; }
  std::string Where() const { return path_.empty() ? "configuration" : path_; }

 private:
  YAML::Node node_;
  std::string path_;
  std::set<std::string> seen_;
};

}  // namespace kvroute::gateway::config_detail

// Returns the error of a std::expected<void, std::string> expression from the enclosing
// function (which returns a std::expected of any value type).
#define KVROUTE_TRY(expr)                                                     \
  do {                                                                        \
    if (auto _r = (expr); !_r) {                                              \
      return ::kvroute::gateway::config_detail::Error(std::move(_r.error())); \
    }                                                                         \
  } while (0)
