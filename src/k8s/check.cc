#include "k8s/check.h"

#include <algorithm>
#include <cctype>
#include <map>
#include <optional>
#include <regex>

namespace kvroute::k8s {
namespace {

using Labels = std::map<std::string, std::string>;

// yaml-cpp's non-const operator[] inserts; every read here goes through const nodes.
YAML::Node Get(const YAML::Node& n, const char* key) {
  if (!n || !n.IsMap()) return YAML::Node(YAML::NodeType::Undefined);
  const YAML::Node& c = n;
  return c[key];
}
// Never assign a YAML::Node that came from a document: yaml-cpp's operator= rewrites the
// node it referred to (and throws on a missing one). Walk by copy-construction instead.
YAML::Node AtImpl(const YAML::Node& n, const char* const* b, const char* const* e) {
  if (b == e) return n;
  YAML::Node next = Get(n, *b);
  if (!next) return next;
  return AtImpl(next, b + 1, e);
}
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

// A pod template: a workload's spec.template (or a Pod itself).
struct PodTemplate {
  const Object* owner;
  std::string prefix;  // field path of the pod spec: "spec.template.spec"
  YAML::Node spec;
  Labels labels;
};

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

// Container helpers. Flags are looked up in command + args: `--flag=v`, `--flag v` (two
// elements) or inside a shell string (`sh -c "vllm serve … --flag v"`).
struct Container {
  std::string name;
  std::string field;  // "spec.template.spec.containers[vllm]"
  YAML::Node node;
};

std::vector<Container> Containers(const PodTemplate& p, bool with_init = false) {
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

class Checker {
 public:
  Checker(const std::vector<Object>& objects, const CheckOptions& options)
      : objects_(objects), options_(options), pods_(PodTemplates(objects)) {}

  std::vector<Finding> Run() {
    Drain();
    FailureMode();
    Floating();
    KvEvents();
    Selectors();
    return std::move(out_);
  }

 private:
  void Add(Severity s, const char* rule, const Object& o, std::string field, std::string msg) {
    out_.push_back({s, rule, o.Ref(), o.source, std::move(field), std::move(msg)});
  }

  void Drain() {
    for (const auto& p : pods_) {
      auto grace_set = Int(Get(p.spec, "terminationGracePeriodSeconds"));
      long grace = grace_set.value_or(30);
      for (const auto& c : Containers(p)) {
        std::string what;
        long shutdown = 0;
        auto argv = Argv(c);
        if (IsVllm(c)) {
          auto t = FlagText(argv, "--shutdown-timeout");
          if (!t) t = FlagText(argv, "--shutdown_timeout");
          if (!t || !LeadingInt(*t)) {
            Add(Severity::kWarning, "drain", *p.owner, c.field + ".args",
                "vLLM without --shutdown-timeout aborts its in-flight requests at SIGTERM");
            continue;
          }
          shutdown = *LeadingInt(*t);
          what = "--shutdown-timeout " + std::to_string(shutdown);
        } else if (IsKvroute(c)) {
          // kvroute's SIGTERM: /ready fails, shutdown_grace_s later the listener closes, then
          // in-flight requests get drain_timeout_s (docs/operations.md, Draining).
          YAML::Node cfg = KvrouteConfig(p, objects_);
          what = "--drain-timeout";
          if (auto t = FlagText(argv, "--drain-timeout"); t && LeadingInt(*t)) {
            shutdown = *LeadingInt(*t);
          } else if (auto d = Int(Get(cfg, "drain_timeout_s"))) {
            shutdown = *d;
            what = "drain_timeout_s";
          } else {
            shutdown = 30;
            what = "drain_timeout_s (default)";
          }
          auto grace_s = Int(Get(cfg, "shutdown_grace_s"));
          long listener = grace_s.value_or(1);
          what += " " + std::to_string(shutdown) + " + shutdown_grace_s" + (grace_s ? "" : " (default)");
          shutdown += listener;
          what += " " + std::to_string(listener);
        } else {
          continue;
        }
        long pre = PreStopSleep(c);
        long need = pre + shutdown + options_.teardown_buffer_s;
        if (grace < need) {
          Add(Severity::kError, "drain", *p.owner, p.prefix + ".terminationGracePeriodSeconds",
              "terminationGracePeriodSeconds " + std::to_string(grace) +
                  (grace_set ? "" : " (unset: Kubernetes' default)") + " < preStop sleep " +
                  std::to_string(pre) + " + " + what + " + teardown buffer " +
                  std::to_string(options_.teardown_buffer_s) + " = " +
                  std::to_string(need) + " (container " + c.name +
                  "): SIGKILL would cut requests still draining");
        }
      }
    }
  }

  void FailureMode() {
    for (const auto& o : objects_) {
      if (o.kind != "InferencePool") continue;
      // v1: endpointPickerRef; v1alpha2: extensionRef.
      const char* key = At(o.node, {"spec", "endpointPickerRef"}) ? "endpointPickerRef" : "extensionRef";
      YAML::Node ref = At(o.node, {"spec", key});
      if (!ref) {
        Add(Severity::kWarning, "failure-mode", o, "spec.endpointPickerRef",
            "no endpoint picker: most gateways require one for an InferencePool");
        continue;
      }
      std::string field = std::string("spec.") + key + ".failureMode";
      std::string mode = Str(Get(ref, "failureMode"));
      if (mode.empty()) {
        Add(Severity::kError, "failure-mode", o, field,
            "not set: unset means FailClose (requests fail while the picker is unavailable); "
            "write FailClose or FailOpen explicitly");
      } else if (mode != "FailClose" && mode != "FailOpen") {
        Add(Severity::kError, "failure-mode", o, field,
            "'" + mode + "' is not one of FailClose, FailOpen");
      }
    }
  }

  static std::optional<std::string> FloatingTag(const std::string& tag) {
    static const std::regex kBareMajor(R"(v?\d+)");
    std::string t = tag;
    std::transform(t.begin(), t.end(), t.begin(), [](unsigned char ch) { return std::tolower(ch); });
    for (const char* f : {"main", "master", "nightly", "dev", "edge", "stable", "head"}) {
      if (t == f) return "'" + tag + "' follows a branch or channel";
    }
    if (t.find("latest") != std::string::npos) return "'" + tag + "' moves with every release";
    if (std::regex_match(t, kBareMajor)) return "'" + tag + "' is a bare major version and moves";
    return std::nullopt;
  }
  static std::optional<std::string> FloatingVersion(const std::string& v) {
    if (v.empty() || v == "*") return std::string("no version: the newest chart is taken");
    if (v.find_first_of("*^~<>|") != std::string::npos || v.find(".x") != std::string::npos) {
      return "'" + v + "' is a range";
    }
    return FloatingTag(v);
  }

  void CheckVersionLabels(const Object& o, const YAML::Node& labels, const std::string& field) {
    std::string chart = Str(Get(labels, "helm.sh/chart"));
    if (!chart.empty()) {
      static const std::regex kChart(R"(^(.*?)-(v?\d.*)$)");
      std::smatch m;
      std::string version = std::regex_match(chart, m, kChart) ? std::string(m[2]) : "";
      if (auto why = FloatingVersion(version)) {
        Add(Severity::kError, "floating", o, field + ".helm.sh/chart", "chart '" + chart + "': " + *why);
      }
    }
    std::string app = Str(Get(labels, "app.kubernetes.io/version"));
    if (!app.empty()) {
      if (auto why = FloatingTag(app)) {
        Add(Severity::kError, "floating", o, field + ".app.kubernetes.io/version", *why);
      }
    }
  }

  void Floating() {
    for (const auto& p : pods_) {
      for (const auto& c : Containers(p, /*with_init=*/true)) {
        std::string image = Str(Get(c.node, "image"));
        std::string field = c.field + ".image";
        if (image.empty()) continue;
        if (image.find('@') != std::string::npos) continue;  // pinned by digest
        std::string last = image.substr(image.rfind('/') == std::string::npos ? 0 : image.rfind('/') + 1);
        size_t colon = last.find(':');
        if (colon == std::string::npos) {
          Add(Severity::kError, "floating", *p.owner, field,
              "image '" + image + "' has no tag (means latest); pin a release tag or a digest");
        } else if (auto why = FloatingTag(last.substr(colon + 1))) {
          Add(Severity::kError, "floating", *p.owner, field, "image '" + image + "': " + *why);
        }
      }
      CheckVersionLabels(*p.owner, At(p.owner->node, {"spec", "template", "metadata", "labels"}),
                         "spec.template.metadata.labels");
    }
    for (const auto& o : objects_) {
      CheckVersionLabels(o, At(o.node, {"metadata", "labels"}), "metadata.labels");
      if (o.kind == "HelmRelease") {
        if (auto why = FloatingVersion(Str(At(o.node, {"spec", "chart", "spec", "version"})))) {
          Add(Severity::kError, "floating", o, "spec.chart.spec.version", *why);
        }
      } else if (o.kind == "HelmChart") {
        if (auto why = FloatingVersion(Str(At(o.node, {"spec", "version"})))) {
          Add(Severity::kError, "floating", o, "spec.version", *why);
        }
      }
    }
  }

  std::vector<const PodTemplate*> SelectedPods(const Object& pool) const {
    std::vector<const PodTemplate*> out;
    Labels sel = PoolSelector(pool);
    for (const auto& p : pods_) {
      if (p.owner->ns == pool.ns && Matches(sel, p.labels)) out.push_back(&p);
    }
    return out;
  }
  static Labels PoolSelector(const Object& pool) {
    YAML::Node sel = At(pool.node, {"spec", "selector"});
    if (Get(sel, "matchLabels")) return LabelMap(Get(sel, "matchLabels"));
    return LabelMap(sel);  // v1alpha2: a plain label map
  }

  void KvEvents() {
    for (const auto& picker : pods_) {
      bool is_picker = false;
      for (const auto& c : Containers(picker)) is_picker = is_picker || IsKvroute(c);
      if (!is_picker) continue;
      YAML::Node cfg = KvrouteConfig(picker, objects_);
      std::string mode = Str(Get(cfg, "mode"));
      if (!mode.empty() && mode != "precise") continue;
      std::string why = picker.owner->Ref() + " routes in precise mode" +
                        (mode.empty() ? " (its default)" : "") +
                        " and reads the engines' KV events; without them it sees no cached "
                        "prefix: enable --kv-events-config or set mode: approximate";
      std::vector<const PodTemplate*> targets;
      bool any_pool = false;
      for (const auto& o : objects_) {
        if (o.kind != "InferencePool" || o.ns != picker.owner->ns) continue;
        any_pool = true;
        for (const auto* p : SelectedPods(o)) targets.push_back(p);
      }
      if (!any_pool) {
        for (const auto& p : pods_) {
          if (p.owner->ns == picker.owner->ns) targets.push_back(&p);
        }
      }
      for (const auto* p : targets) {
        for (const auto& c : Containers(*p)) {
          if (!IsVllm(c) || KvEventsEnabled(c)) continue;
          Add(Severity::kError, "kv-events", *p->owner, c.field + ".args",
              "no --kv-events-config with enable_kv_cache_events: true, but " + why);
        }
      }
    }
  }

  void Selectors() {
    auto matches_any = [&](const Object& o, const Labels& sel) {
      return std::any_of(pods_.begin(), pods_.end(), [&](const PodTemplate& p) {
        return p.owner->ns == o.ns && Matches(sel, p.labels);
      });
    };
    for (const auto& o : objects_) {
      if (o.kind == "InferencePool") {
        Labels sel = PoolSelector(o);
        std::string field = Get(At(o.node, {"spec", "selector"}), "matchLabels")
                                ? "spec.selector.matchLabels" : "spec.selector";
        if (sel.empty()) {
          Add(Severity::kError, "selector", o, field, "empty: an InferencePool needs 1 to 64 labels");
        } else if (!matches_any(o, sel)) {
          Add(Severity::kError, "selector", o, field,
              Show(sel) + " matches no pod template in namespace '" + o.ns + "': the pool is empty");
        }
      } else if (o.kind == "Service") {
        Labels sel = LabelMap(At(o.node, {"spec", "selector"}));
        if (!sel.empty() && !matches_any(o, sel)) {
          Add(Severity::kError, "selector", o, "spec.selector",
              Show(sel) + " matches no pod template in namespace '" + o.ns + "': no endpoints");
        }
      }
    }
    for (const auto& p : pods_) {
      if (p.owner->kind == "Pod") continue;
      YAML::Node ml = At(p.owner->node, {"spec", "selector", "matchLabels"});
      if (!ml) continue;
      Labels sel = LabelMap(ml);
      if (!Matches(sel, p.labels)) {
        Add(Severity::kError, "selector", *p.owner, "spec.selector.matchLabels",
            Show(sel) + " does not match its own pod template's labels " + Show(p.labels));
      }
    }
  }

  const std::vector<Object>& objects_;
  const CheckOptions& options_;
  std::vector<PodTemplate> pods_;
  std::vector<Finding> out_;
};

}  // namespace

std::vector<Finding> CheckManifests(const std::vector<Object>& objects, const CheckOptions& options) {
  return Checker(objects, options).Run();
}

std::string FormatFinding(const Finding& f) {
  return std::string(f.severity == Severity::kError ? "error" : "warning") + " [" + f.rule + "] " +
         f.object + " (" + f.source + ") " + f.field + ": " + f.message;
}

int RunCheck(const std::string& path, const CheckOptions& options, std::ostream& out, std::ostream& err) {
  auto objects = LoadManifests(path);
  if (!objects) {
    err << "kvroute config check --k8s: " << objects.error() << "\n";
    return 2;
  }
  std::vector<Finding> findings;
  try {
    findings = CheckManifests(*objects, options);
  } catch (const YAML::Exception& e) {  // a shape no rule expects (a map as a label key, …)
    err << "kvroute config check --k8s: " << path << ": " << e.what() << "\n";
    return 2;
  }
  int errors = 0, warnings = 0;
  for (const auto& f : findings) {
    ++(f.severity == Severity::kError ? errors : warnings);
    out << FormatFinding(f) << "\n";
  }
  out << "# " << objects->size() << " objects checked: " << errors << " errors, " << warnings
      << " warnings\n";
  return errors > 0 ? 2 : 0;
}

}  // namespace kvroute::k8s
