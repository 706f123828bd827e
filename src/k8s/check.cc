#include "k8s/check.h"

#include <algorithm>
#include <cctype>
#include <map>
#include <optional>
#include <regex>

#include "k8s/pod_spec_read.h"

namespace kvroute::k8s {
namespace {

using namespace pod_spec;


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
    ServeConfig();
    return std::move(out_);
  }

 private:
  void Add(Severity s, const char* rule, const Object& o, std::string field, std::string msg) {
    out_.push_back({s, rule, o.Ref(), o.source, std::move(field), std::move(msg)});
  }

  void ServeConfig() {
    if (!options_.validate_serve_config) return;
    for (const auto& p : pods_) {
      for (const auto& c : Containers(p)) {
        if (!IsKvroute(c)) continue;
        auto argv = Argv(c);
        auto serve = std::find(argv.begin(), argv.end(), "serve");
        if (serve == argv.end()) continue;
        YAML::Node cfg = KvrouteConfig(p, objects_);
        if (!cfg) {  // a Secret, or a config without the keys KvrouteConfig recognises it by
          Add(Severity::kWarning, "config", *p.owner, c.field + ".args",
              "runs kvroute serve but no mounted ConfigMap value looks like its configuration "
              "(mode, workers or drain_timeout_s): not checked");
          continue;
        }
        YAML::Emitter text;
        text << cfg;
        if (auto refused = options_.validate_serve_config(text.c_str(), {serve + 1, argv.end()})) {
          Add(Severity::kError, "config", *p.owner, c.field,
              "kvroute serve would refuse its mounted configuration with these args: " + *refused);
        }
      }
    }
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
