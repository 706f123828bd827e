#include "k8s/manifest.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
#include <set>
#include <sstream>

namespace kvroute::k8s {
namespace {

namespace fs = std::filesystem;
using Result = std::expected<std::vector<Object>, std::string>;

std::string Scalar(const YAML::Node& n) {
  return n && n.IsScalar() ? n.as<std::string>() : std::string();
}

// Fields of a Kustomization that change the objects its resources produce.
constexpr const char* kTransforming[] = {
    "patches", "patchesStrategicMerge", "patchesJson6902", "images", "namePrefix",
    "nameSuffix", "namespace", "commonLabels", "labels", "commonAnnotations", "replicas",
    "configMapGenerator", "secretGenerator", "helmCharts", "components", "replacements",
    "transformers", "generators", "vars"};

std::expected<std::string, std::string> ReadFile(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  if (!in) return std::unexpected(p.string() + ": cannot read");
  return std::string(std::istreambuf_iterator<char>(in), {});
}

Result LoadPath(const fs::path& p, std::set<fs::path>* seen);

Result LoadKustomization(const fs::path& dir, const fs::path& file, std::set<fs::path>* seen) {
  auto text = ReadFile(file);
  if (!text) return std::unexpected(text.error());
  std::vector<YAML::Node> loaded;  // a vector: a YAML::Node must not be assigned (see check.cc)
  try {
    loaded.push_back(YAML::Load(*text));
  } catch (const YAML::Exception& e) {
    return std::unexpected(file.string() + ": " + e.what());
  }
  const YAML::Node& k = loaded.front();
  if (!k.IsMap()) return std::unexpected(file.string() + ": not a map");
  for (const char* field : kTransforming) {
    if (k[field]) {
      return std::unexpected(file.string() + ": `" + field +
                             "` transforms the resources; render first: kustomize build " +
                             dir.string() + " | kvroute config check --k8s -");
    }
  }
  std::vector<Object> out;
  YAML::Node resources = k["resources"];
  if (resources && !resources.IsSequence()) {
    return std::unexpected(file.string() + ": resources: must be a list");
  }
  for (const auto& r : resources) {
    auto sub = LoadPath((dir / Scalar(r)).lexically_normal(), seen);
    if (!sub) return sub;
    std::move(sub->begin(), sub->end(), std::back_inserter(out));
  }
  return out;
}

Result LoadPath(const fs::path& p, std::set<fs::path>* seen) {
  std::error_code ec;
  fs::path canon = fs::weakly_canonical(p, ec);
  if (!seen->insert(canon).second) return std::vector<Object>{};  // listed twice: read once
  if (fs::is_regular_file(p, ec)) {
    auto text = ReadFile(p);
    if (!text) return std::unexpected(text.error());
    return ParseManifests(*text, p.string());
  }
  if (!fs::is_directory(p, ec)) return std::unexpected(p.string() + ": no such file or directory");
  for (const char* name : {"kustomization.yaml", "kustomization.yml", "Kustomization"}) {
    if (fs::is_regular_file(p / name, ec)) return LoadKustomization(p, p / name, seen);
  }
  std::vector<fs::path> files;
  for (const auto& e : fs::recursive_directory_iterator(p, ec)) {
    auto ext = e.path().extension();
    if (e.is_regular_file() && (ext == ".yaml" || ext == ".yml")) files.push_back(e.path());
  }
  std::sort(files.begin(), files.end());
  std::vector<Object> out;
  for (const auto& f : files) {
    auto sub = LoadPath(f, seen);
    if (!sub) return sub;
    std::move(sub->begin(), sub->end(), std::back_inserter(out));
  }
  return out;
}

void AddObject(const YAML::Node& doc, const std::string& source, std::vector<Object>* out) {
  Object o;
  o.source = source;
  o.api_version = Scalar(doc["apiVersion"]);
  o.kind = Scalar(doc["kind"]);
  const YAML::Node meta = doc["metadata"];
  if (meta && meta.IsMap()) {
    o.name = Scalar(meta["name"]);
    o.ns = Scalar(meta["namespace"]);
  }
  o.node = doc;
  out->push_back(std::move(o));
}

}  // namespace

Result ParseManifests(std::string_view text, const std::string& source) {
  std::vector<YAML::Node> docs;
  try {
    docs = YAML::LoadAll(std::string(text));
  } catch (const YAML::Exception& e) {
    return std::unexpected(source + ": " + e.what());
  }
  std::vector<Object> out;
  for (size_t i = 0; i < docs.size(); ++i) {
    const YAML::Node& doc = docs[i];
    std::string where = source + "#" + std::to_string(i + 1);
    if (doc.IsNull()) continue;
    if (!doc.IsMap() || !doc["kind"] || !doc["kind"].IsScalar()) {
      return std::unexpected(where + ": not a Kubernetes object (a map with `kind`)");
    }
    if (Scalar(doc["kind"]) == "List" || Scalar(doc["kind"]).ends_with("List")) {
      if (!doc["items"] || !doc["items"].IsSequence()) continue;
      for (const auto& item : doc["items"]) {
        if (item.IsMap() && item["kind"]) AddObject(item, where, &out);
      }
      continue;
    }
    AddObject(doc, where, &out);
  }
  return out;
}

std::expected<std::vector<Object>, std::string> LoadManifests(const std::string& path) {
  if (path == "-") {
    std::ostringstream text;
    text << std::cin.rdbuf();
    return ParseManifests(text.str(), "<stdin>");
  }
  std::set<fs::path> seen;
  return LoadPath(path, &seen);
}

}  // namespace kvroute::k8s
