// Reading rendered manifests for `kvroute config check --k8s` (check.cc's rules): safe YAML
// access on const nodes, pod templates of every workload kind, their containers, a
// container's flags (command + args, or inside a shell string), and the facts the rules ask
// about (vLLM or kvroute, preStop sleep, KV events on, the kvroute config a pod mounts).
// Internal to src/k8s/. Pure functions; thread safety: none needed.
#pragma once

#include <yaml-cpp/yaml.h>

#include <initializer_list>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "k8s/manifest.h"

namespace kvroute::k8s::pod_spec {

using Labels = std::map<std::string, std::string>;

// A pod template: a workload's spec.template (or a Pod itself).
struct PodTemplate {
  const Object* owner;
  std::string prefix;  // field path of the pod spec: "spec.template.spec"
  YAML::Node spec;
  Labels labels;
};

// Container helpers. Flags are looked up in command + args: `--flag=v`, `--flag v` (two
// elements) or inside a shell string (`sh -c "vllm serve … --flag v"`).
struct Container {
  std::string name;
  std::string field;  // "spec.template.spec.containers[vllm]"
  YAML::Node node;
};

// yaml-cpp's non-const operator[] inserts; every read here goes through const nodes.
YAML::Node Get(const YAML::Node& n, const char* key);
// The node at `path` (a missing step gives a null node), walked by copy-construction.
YAML::Node At(const YAML::Node& n, std::initializer_list<const char*> path);
std::string Str(const YAML::Node& n);         // a scalar's text, "" otherwise
std::optional<long> Int(const YAML::Node& n);  // an integer scalar
Labels LabelMap(const YAML::Node& n);
std::string Show(const Labels& l);                        // k=v,k=v
bool Matches(const Labels& selector, const Labels& labels);  // every selector pair present

std::vector<PodTemplate> PodTemplates(const std::vector<Object>& objects);
// `with_init`: init and ephemeral containers too.
std::vector<Container> Containers(const PodTemplate& p, bool with_init = false);
std::vector<std::string> Argv(const Container& c);  // command + args
// The text after `flag` (and its '=' or space) or nullopt when the flag is absent.
std::optional<std::string> FlagText(const std::vector<std::string>& argv, const std::string& flag);
std::optional<long> LeadingInt(const std::string& s);
bool IsVllm(const Container& c);
bool IsKvroute(const Container& c);
// preStop sleep seconds: lifecycle.preStop.sleep.seconds, or an exec `sleep N`.
long PreStopSleep(const Container& c);
// The kvroute configuration a pod mounts: the first ConfigMap value among its volumes that
// parses as a YAML map with a key only kvroute's config has.
YAML::Node KvrouteConfig(const PodTemplate& p, const std::vector<Object>& objects);
bool KvEventsEnabled(const Container& c);  // --kv-events-config with enable_kv_cache_events

}  // namespace kvroute::k8s::pod_spec
