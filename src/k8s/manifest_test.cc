// Reading manifests: multi-document text, Lists, resources-only kustomizations. Files only;
// no Kubernetes API server is involved (none runs here).
#include "k8s/manifest.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

namespace kvroute::k8s {
namespace {

namespace fs = std::filesystem;

class TempDir {
 public:
  TempDir() : path_(fs::temp_directory_path() / ("kvroute_k8s_" + std::to_string(::getpid()) + "_" +
                                                 std::to_string(counter_++))) {
    fs::create_directories(path_);
  }
  ~TempDir() { fs::remove_all(path_); }
  void Write(const std::string& rel, const std::string& text) const {
    fs::create_directories((path_ / rel).parent_path());
    std::ofstream(path_ / rel) << text;
  }
  const fs::path& path() const { return path_; }

 private:
  static inline int counter_ = 0;
  fs::path path_;
};

TEST(ParseManifests, ReadsEveryDocumentAndSkipsEmptyOnes) {
  auto objs = ParseManifests(
      "apiVersion: v1\nkind: Service\nmetadata: {name: a, namespace: ns}\n---\n---\n"
      "kind: ConfigMap\nmetadata: {name: b}\n",
      "x.yaml");
  ASSERT_TRUE(objs) << objs.error();
  ASSERT_EQ(objs->size(), 2u);
  EXPECT_EQ((*objs)[0].Ref(), "Service/a");
  EXPECT_EQ((*objs)[0].ns, "ns");
  EXPECT_EQ((*objs)[0].source, "x.yaml#1");
  EXPECT_EQ((*objs)[1].source, "x.yaml#3");
}

TEST(ParseManifests, ListContributesItsItems) {
  auto objs = ParseManifests(
      "apiVersion: v1\nkind: List\nitems:\n- {kind: Pod, metadata: {name: p}}\n"
      "- {kind: Service, metadata: {name: s}}\n",
      "l.yaml");
  ASSERT_TRUE(objs) << objs.error();
  ASSERT_EQ(objs->size(), 2u);
  EXPECT_EQ((*objs)[1].Ref(), "Service/s");
}

TEST(ParseManifests, DocumentWithoutKindIsAnErrorNamingIt) {
  auto objs = ParseManifests("kind: Pod\nmetadata: {name: p}\n---\n- a\n", "bad.yaml");
  ASSERT_FALSE(objs);
  EXPECT_NE(objs.error().find("bad.yaml#2"), std::string::npos) << objs.error();
}

TEST(LoadManifests, FollowsKustomizationResourcesInOrder) {
  TempDir d;
  d.Write("base/kustomization.yaml", "resources: [a.yaml]\n");
  d.Write("base/a.yaml", "kind: Service\nmetadata: {name: a}\n");
  d.Write("base/ignored.yaml", "kind: Service\nmetadata: {name: not-listed}\n");
  d.Write("overlay/kustomization.yaml", "resources: [../base, b.yaml]\n");
  d.Write("overlay/b.yaml", "kind: Service\nmetadata: {name: b}\n");
  auto objs = LoadManifests((d.path() / "overlay").string());
  ASSERT_TRUE(objs) << objs.error();
  ASSERT_EQ(objs->size(), 2u);
  EXPECT_EQ((*objs)[0].name, "a");
  EXPECT_EQ((*objs)[1].name, "b");
}

TEST(LoadManifests, TransformingKustomizationAsksForRenderedInput) {
  TempDir d;
  d.Write("kustomization.yaml", "resources: [a.yaml]\nnamePrefix: x-\n");
  d.Write("a.yaml", "kind: Service\nmetadata: {name: a}\n");
  auto objs = LoadManifests(d.path().string());
  ASSERT_FALSE(objs);
  EXPECT_NE(objs.error().find("namePrefix"), std::string::npos) << objs.error();
  EXPECT_NE(objs.error().find("kustomize build"), std::string::npos) << objs.error();
}

TEST(LoadManifests, PlainDirectoryReadsEveryYamlFileSorted) {
  TempDir d;
  d.Write("b.yml", "kind: Service\nmetadata: {name: b}\n");
  d.Write("sub/a.yaml", "kind: Service\nmetadata: {name: a}\n");
  d.Write("notes.txt", "not yaml");
  auto objs = LoadManifests(d.path().string());
  ASSERT_TRUE(objs) << objs.error();
  ASSERT_EQ(objs->size(), 2u);
  EXPECT_EQ((*objs)[0].name, "b");
}

TEST(LoadManifests, MissingPathIsAnError) {
  auto objs = LoadManifests("/nonexistent/kvroute/manifests");
  ASSERT_FALSE(objs);
  EXPECT_NE(objs.error().find("no such file"), std::string::npos);
}

}  // namespace
}  // namespace kvroute::k8s
