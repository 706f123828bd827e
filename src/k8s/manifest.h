// Rendered Kubernetes manifests read into memory: one Object per YAML document (a `kind: List`
// contributes its items). Reading only; nothing here talks to a Kubernetes API server.
//
// Sources: a file, a directory, or "-" (stdin). A directory with a kustomization.yaml is read
// as `kustomize build` would read a resources-only kustomization: its `resources:` entries in
// order (files, or directories with their own kustomization.yaml). Any transforming field
// (patches, images, namePrefix, generators, …) is an error that asks for a rendered input
// (`kustomize build DIR | kvroute config check --k8s -`), since reading the files unrendered
// would check objects that are not the ones applied. A directory without one: every *.yaml /
// *.yml below it, sorted by path.
//
// Thread safety: free functions over values; safe from any thread.
#pragma once

#include <yaml-cpp/yaml.h>

#include <expected>
#include <string>
#include <string_view>
#include <vector>

namespace kvroute::k8s {

struct Object {
  std::string source;  // file path (or "<stdin>") and document number: "a.yaml#2"
  std::string api_version;
  std::string kind;
  std::string name;
  std::string ns;  // metadata.namespace; "" when unset
  YAML::Node node;

  // "StatefulSet/vllm" — how findings name the object.
  std::string Ref() const { return kind + "/" + name; }
};

// Parses multi-document YAML text. Empty documents are skipped; a document that is not a map
// with `kind` is an error naming `source` and the document number.
std::expected<std::vector<Object>, std::string> ParseManifests(std::string_view text,
                                                               const std::string& source);

// Reads `path` as described above ("-" reads stdin).
std::expected<std::vector<Object>, std::string> LoadManifests(const std::string& path);

}  // namespace kvroute::k8s
