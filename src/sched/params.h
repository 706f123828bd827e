// Params: the options map of one plug-in entry in a policy's YAML, read by that plug-in's
// factory. Every read records the key; the registry then rejects any key nobody read, so a
// typo ("wieght") is an error naming it instead of a silently ignored option. Errors carry
// the YAML path of the offending key ("scorers[1].temperature: ..."). Every value read is
// also recorded with defaults resolved (Resolved()), so `kvroute config check` can print the
// effective policy.
//
// Ownership: holds a YAML::Node by value (yaml-cpp nodes share their document).
// Thread safety: single use, by the thread parsing the configuration.
#pragma once

#include <expected>
#include <memory>
#include <set>
#include <string>
#include <string_view>
#include <vector>

namespace YAML {
class Node;
}

namespace kvroute::sched {

struct ConfigError {
  std::string message;  // "<path>.<key>: what is wrong"
};

class Params {
 public:
  // `node` must be a map (or null for "no options"); `path` prefixes error messages.
  Params(const YAML::Node& node, std::string path);
  ~Params();
  Params(const Params&) = delete;
  Params& operator=(const Params&) = delete;

  const std::string& path() const { return path_; }

  // A number in [min, max] (finite), or `fallback` when the key is absent.
  std::expected<double, ConfigError> Number(std::string_view key, double fallback, double min,
                                            double max);
  // A string, or `fallback` when absent.
  std::expected<std::string, ConfigError> String(std::string_view key, std::string fallback);
  // A list of strings (absent: empty).
  std::expected<std::vector<std::string>, ConfigError> StringList(std::string_view key);

  // Marks a key as read by someone other than the factory (e.g. "name").
  void Consume(std::string_view key) { consumed_.emplace(key); }
  // Error naming the first key present in the node but never read.
  std::expected<void, ConfigError> RejectUnknownKeys() const;

  ConfigError Error(std::string_view key, std::string_view what) const;

  // A map of every option read so far with its effective value (defaults included).
  const YAML::Node& Resolved() const { return *resolved_; }

 private:
  std::expected<double, ConfigError> ReadNumber(std::string_view key, double fallback, double min,
                                                double max);
  std::expected<std::string, ConfigError> ReadString(std::string_view key, std::string fallback);

  std::unique_ptr<YAML::Node> node_;
  std::unique_ptr<YAML::Node> resolved_;
  std::string path_;
  std::set<std::string, std::less<>> consumed_;
};

}  // namespace kvroute::sched
