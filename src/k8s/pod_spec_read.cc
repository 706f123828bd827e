#include "k8s/pod_spec_read.h"

#include <algorithm>
#include <cctype>
#include <regex>

namespace kvroute::k8s::pod_spec {

// yaml-cpp's non-const operator[] inserts; every read here goes through const nodes.
YAML::Node Get(const YAML::Node& n, const char* key) {
  if (!n || !n.IsMap()) return YAML::Node(YAML::NodeType::Undefined);
  const YAML::Node& c = n;
  return c[key];
}
namespace {
// Never assign a YAML::Node that came from a document: yaml-cpp's operator= rewrites the
// node it referred to (and throws on a missing one). Walk by copy-construction instead.
YAML::Node AtImpl(const YAML::Node& n, const char* const* b, const char* const* e) {
  if (b == e) return n;
  YAML::Node next = Get(n, *b);
  if (!next) return next;
  return AtImpl(next, b + 1, e);
}
}  // namespace

YAML::Node At(const YAML::Node& n, std::initializer_list<const char*> path) {
  return AtImpl(n, path.begin(), path.end());
}
std::string Str(const YAML::Node& n) { return n && n.IsScalar() ? n.as<std::string>() : ""; }
std::optional<long> Int(const YAML::Node& n) {
  if (!n || !n.IsScalar()) return std::nullopt;
  try {
    return n.as<long>();
  } catch (const YAML::Exception&) {
    return std::nullopt;
  }
}
Labels LabelMap(const YAML::Node& n) {
  Labels out;
  if (!n || !n.IsMap()) return out;
  for (const auto& kv : n) out[kv.first.as<std::string>()] = Str(kv.second);
  return out;
}
std::string Show(const Labels& l) {
  std::string s = "{";
  for (const auto& [k, v] : l) s += (s.size() > 1 ? ", " : "") + k + ": " + v;
  return s + "}";
}
bool Matches(const Labels& selector, const Labels& labels) {
  if (selector.empty()) return false;
  return std::all_of(selector.begin(), selector.end(), [&](const auto& kv) {
    auto it = labels.find(kv.first);
    return it != labels.end() && it->second == kv.second;
  });
}


std::vector<PodTemplate> PodTemplates(const std::vector<Object>& objects) {
  std::vector<PodTemplate> out;
  auto add = [&out](const Object& o, const std::string& prefix, const YAML::Node& tmpl) {
    if (!tmpl) return;
    out.push_back({&o, prefix + ".spec", Get(tmpl, "spec"), LabelMap(At(tmpl, {"metadata", "labels"}))});
  };
  for (const auto& o : objects) {
    if (o.kind == "Pod") {
      out.push_back({&o, "spec", Get(o.node, "spec"), LabelMap(At(o.node, {"metadata", "labels"}))});
    } else if (o.kind == "Deployment" || o.kind == "StatefulSet" || o.kind == "DaemonSet" ||
               o.kind == "ReplicaSet" || o.kind == "Job") {
      add(o, "spec.template", At(o.node, {"spec", "template"}));
    } else if (o.kind == "LeaderWorkerSet") {
      add(o, "spec.leaderWorkerTemplate.workerTemplate",
          At(o.node, {"spec", "leaderWorkerTemplate", "workerTemplate"}));
    } else if (o.kind == "CronJob") {
      add(o, "spec.jobTemplate.spec.template", At(o.node, {"spec", "jobTemplate", "spec", "template"}));
    }
  }
  return out;
}


std::vector<Container> Containers(const PodTemplate& p, bool with_init) {
  std::vector<Container> out;
  std::vector<const char*> lists = {"containers"};
  if (with_init) lists = {"initContainers", "containers", "ephemeralContainers"};
  for (const char* list : lists) {
    YAML::Node cs = Get(p.spec, list);
    if (!cs || !cs.IsSequence()) continue;
    for (size_t i = 0; i < cs.size(); ++i) {
      std::string name = Str(Get(cs[i], "name"));
      out.push_back({name, p.prefix + "." + list + "[" + (name.empty() ? std::to_string(i) : name) + "]", cs[i]});
    }
  }
  return out;
}

std::vector<std::string> Argv(const Container& c) {
  std::vector<std::string> out;
  for (const char* key : {"command", "args"}) {
    YAML::Node l = Get(c.node, key);
    if (l && l.IsSequence()) {
      for (const auto& s : l) out.push_back(Str(s));
    }
  }
  return out;
}

// The text after `flag` (and its '=' or space) or nullopt when the flag is absent.
std::optional<std::string> FlagText(const std::vector<std::string>& argv, const std::string& flag) {
  for (size_t i = 0; i < argv.size(); ++i) {
    const std::string& a = argv[i];
    if (a == flag) return i + 1 < argv.size() ? argv[i + 1] : std::string();
    if (a.starts_with(flag + "=")) return a.substr(flag.size() + 1);
  }
  for (const auto& a : argv) {  // shell strings
    for (size_t pos = a.find(flag); pos != std::string::npos; pos = a.find(flag, pos + 1)) {
      size_t end = pos + flag.size();
      if (end < a.size() && (a[end] == '=' || a[end] == ' ')) return a.substr(end + 1);
    }
  }
  return std::nullopt;
}
std::optional<long> LeadingInt(const std::string& s) {
  size_t i = 0;
  while (i < s.size() && (s[i] == '"' || s[i] == '\'')) ++i;
  size_t j = i;
  while (j < s.size() && std::isdigit(static_cast<unsigned char>(s[j]))) ++j;
  if (j == i || j - i > 9) return std::nullopt;  // no number, or none a duration can be
  return std::stol(s.substr(i, j - i));
}

bool IsVllm(const Container& c) {
  if (Str(Get(c.node, "image")).find("vllm") != std::string::npos) return true;
  for (const auto& a : Argv(c)) {
    if (a == "vllm" || a.find("vllm serve") != std::string::npos ||
        a.find("vllm.entrypoints") != std::string::npos) {
      return true;
    }
  }
  return false;
}
bool IsKvroute(const Container& c) {
  if (Str(Get(c.node, "image")).find("kvroute") != std::string::npos) return true;
  auto argv = Argv(c);
  return !argv.empty() && argv[0].ends_with("kvroute");
}

// preStop sleep seconds: lifecycle.preStop.sleep.seconds, or an exec `sleep N`.
long PreStopSleep(const Container& c) {
  YAML::Node pre = At(c.node, {"lifecycle", "preStop"});
  if (auto s = Int(At(pre, {"sleep", "seconds"}))) return *s;
  YAML::Node cmd = At(pre, {"exec", "command"});
  if (cmd && cmd.IsSequence()) {
    std::string joined;
    for (const auto& s : cmd) joined += Str(s) + " ";
    static const std::regex kSleep(R"((^|[\s;&|])sleep\s+(\d{1,9}))");
    std::smatch m;
    if (std::regex_search(joined, m, kSleep)) return std::stol(m[2]);
  }
  return 0;
}

// The kvroute configuration a pod mounts: the first ConfigMap value among its volumes that
// parses as a YAML map with a key only kvroute's config has.
YAML::Node KvrouteConfig(const PodTemplate& p, const std::vector<Object>& objects) {
  YAML::Node vols = Get(p.spec, "volumes");
  if (!vols || !vols.IsSequence()) return {};
  for (const auto& v : vols) {
    std::string cm = Str(At(v, {"configMap", "name"}));
    if (cm.empty()) continue;
    for (const auto& o : objects) {
      if (o.kind != "ConfigMap" || o.name != cm || o.ns != p.owner->ns) continue;
      YAML::Node data = Get(o.node, "data");
      if (!data || !data.IsMap()) continue;
      for (const auto& kv : data) {
        try {
          YAML::Node cfg = YAML::Load(Str(kv.second));
          if (cfg.IsMap() && (Get(cfg, "mode") || Get(cfg, "workers") || Get(cfg, "drain_timeout_s"))) {
            return cfg;
          }
        } catch (const YAML::Exception&) {
        }
      }
    }
  }
  return {};
}

bool KvEventsEnabled(const Container& c) {
  auto argv = Argv(c);
  auto text = FlagText(argv, "--kv-events-config");
  if (!text) text = FlagText(argv, "--kv_events_config");
  if (!text) return false;
  size_t open = text->find('{');
  if (open == std::string::npos) return false;
  int depth = 0;
  size_t close = open;
  for (; close < text->size(); ++close) {
    if ((*text)[close] == '{') ++depth;
    if ((*text)[close] == '}' && --depth == 0) break;
  }
  try {
    YAML::Node cfg = YAML::Load(text->substr(open, close - open + 1));
    YAML::Node on = Get(cfg, "enable_kv_cache_events");
    return on && on.IsScalar() && on.as<bool>();
  } catch (const YAML::Exception&) {
    return false;
  }
}

}  // namespace kvroute::k8s::pod_spec
