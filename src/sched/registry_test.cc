#include "sched/registry.h"

#include <gtest/gtest.h>

#include <string>

#include "sched/scorers.h"

namespace kvroute::sched {
namespace {

// The configuration error for `yaml`, or "" if it parsed.
std::string ErrorOf(std::string_view yaml) {
  auto p = Registry::Builtin().ParsePolicy(yaml);
  return p ? "" : p.error().message;
}

TEST(RegistryTest, EveryPresetParsesUnderItsName) {
  for (std::string_view name : BuiltinPolicyNames()) {
    auto p = BuiltinPolicy(name);
    ASSERT_TRUE(p.has_value()) << name << ": " << p.error().message;
    EXPECT_EQ((*p)->name(), name);
  }
  EXPECT_EQ(BuiltinPolicyNames().size(), 7u);
}

TEST(RegistryTest, CustomPolicyKeepsDeclaredOrderWeightsAndRules) {
  auto p = Registry::Builtin().ParsePolicy(R"(
name: mine
filters:
  - {name: healthy}
  - {name: itl_guard, itl_slo_s: 0.05, if_all_dropped: fail}
  - {name: role, allowed: [mixed, prefill]}
scorers:
  - {name: predicted_ttft, weight: 2.5}
  - {name: kv_usage}
picker: {name: softmax, temperature: 0.2}
)");
  ASSERT_TRUE(p.has_value()) << p.error().message;
  const Policy& policy = **p;
  EXPECT_EQ(policy.name(), "mine");
  ASSERT_EQ(policy.filters().size(), 3u);
  EXPECT_EQ(policy.filters()[1].filter->Name(), "itl_guard");
  EXPECT_EQ(policy.filters()[1].if_all_dropped, IfAllDropped::kFail);
  EXPECT_EQ(policy.filters()[0].if_all_dropped, IfAllDropped::kFail);
  ASSERT_EQ(policy.scorers().size(), 2u);
  EXPECT_DOUBLE_EQ(policy.scorers()[0].weight, 2.5);
  EXPECT_DOUBLE_EQ(policy.scorers()[1].weight, 1.0);
  EXPECT_EQ(policy.picker().Name(), "softmax");
}

TEST(RegistryTest, SoftFiltersDefaultToKeepAll) {
  auto p = Registry::Builtin().ParsePolicy(
      "filters: [{name: prefix_affinity}]\nscorers: [{name: token_load}]\npicker: {name: argmin}");
  ASSERT_TRUE(p.has_value()) << p.error().message;
  EXPECT_EQ((*p)->filters()[0].if_all_dropped, IfAllDropped::kKeepAll);
}

TEST(RegistryTest, UnknownOptionKeyIsNamedWithItsPath) {
  EXPECT_EQ(
      ErrorOf(
          "scorers: [{name: kv_usage}, {name: dynamo_cost, wieght: 2}]\npicker: {name: argmin}"),
      "scorers[1].wieght: unknown key");
}

TEST(RegistryTest, UnknownTopLevelKeyIsNamed) {
  EXPECT_EQ(ErrorOf("scorers: [{name: kv_usage}]\npicker: {name: argmin}\nfilter: []"),
            "policy.filter: unknown key");
}

TEST(RegistryTest, UnknownPluginNameListsTheKnownOnes) {
  const std::string e = ErrorOf("filters: [{name: healty}]\npicker: {name: random}");
  EXPECT_NE(e.find("filters[0].name: unknown filter 'healty'"), std::string::npos) << e;
  EXPECT_NE(e.find("healthy"), std::string::npos) << e;
}

TEST(RegistryTest, NonNumericOptionIsRejected) {
  EXPECT_EQ(ErrorOf("scorers: [{name: kv_usage}]\npicker: {name: softmax, temperature: warm}"),
            "picker.temperature: expected a finite number");
}

TEST(RegistryTest, NegativeWeightIsRejected) {
  const std::string e = ErrorOf("scorers: [{name: kv_usage, weight: -1}]\npicker: {name: argmin}");
  EXPECT_NE(e.find("scorers[0].weight: -1 is outside"), std::string::npos) << e;
}

TEST(RegistryTest, ThresholdAboveOneIsRejected) {
  const std::string e = ErrorOf(
      "filters: [{name: prefix_affinity, threshold: 1.5}]\nscorers: [{name: token_load}]\npicker: "
      "{name: argmin}");
  EXPECT_NE(e.find("filters[0].threshold"), std::string::npos) << e;
}

TEST(RegistryTest, BadIfAllDroppedValueIsRejected) {
  const std::string e =
      ErrorOf("filters: [{name: healthy, if_all_dropped: maybe}]\npicker: {name: random}");
  EXPECT_NE(e.find("filters[0].if_all_dropped"), std::string::npos) << e;
}

TEST(RegistryTest, UnknownRoleIsRejected) {
  const std::string e =
      ErrorOf("filters: [{name: role, allowed: [encode]}]\npicker: {name: random}");
  EXPECT_NE(e.find("unknown role 'encode'"), std::string::npos) << e;
}

TEST(RegistryTest, MissingPickerIsRejected) {
  EXPECT_EQ(ErrorOf("scorers: [{name: kv_usage}]"), "policy.picker: missing");
}

TEST(RegistryTest, CostPickerWithoutScorersIsRejected) {
  const std::string e = ErrorOf("picker: {name: argmin}");
  EXPECT_NE(e.find("needs at least one scorer"), std::string::npos) << e;
}

TEST(RegistryTest, EntryWithoutNameIsRejected) {
  EXPECT_EQ(ErrorOf("filters: [{if_all_dropped: fail}]\npicker: {name: random}"),
            "filters[0].name: missing plug-in name");
}

TEST(RegistryTest, UnknownPresetListsTheKnownOnes) {
  const std::string e = ErrorOf("preset: fastest");
  EXPECT_NE(e.find("unknown preset 'fastest'"), std::string::npos) << e;
  EXPECT_NE(e.find("predicted_latency"), std::string::npos) << e;
}

TEST(RegistryTest, PresetCannotBeMixedWithOtherKeys) {
  EXPECT_EQ(ErrorOf("preset: dynamo_cost\npicker: {name: argmin}"),
            "policy.preset: cannot be combined with other keys");
}

TEST(RegistryTest, SyntaxErrorIsAnErrorNotAnException) {
  const std::string e = ErrorOf("filters: [{name: healthy");
  EXPECT_NE(e.find("invalid YAML"), std::string::npos) << e;
}

TEST(RegistryTest, NonMapDocumentIsRejected) {
  EXPECT_EQ(ErrorOf("- just\n- a list"), "policy: expected a map");
}

TEST(RegistryTest, PluginRegisteredByTheCallerIsUsableAndValidated) {
  Registry r = Registry::Builtin();
  r.AddScorer("constant",
              [](Params& p) -> std::expected<std::shared_ptr<const Scorer>, ConfigError> {
                auto unused = p.Number("value", 0, 0, 10);
                if (!unused) return std::unexpected(unused.error());
                return NewKvUsageScorer();
              });
  EXPECT_TRUE(
      r.ParsePolicy("scorers: [{name: constant, value: 3}]\npicker: {name: argmin}").has_value());
  auto bad = r.ParsePolicy("scorers: [{name: constant, value: 30}]\npicker: {name: argmin}");
  ASSERT_FALSE(bad.has_value());
  EXPECT_NE(bad.error().message.find("scorers[0].value"), std::string::npos);
  // The built-in registry is unchanged.
  EXPECT_FALSE(Registry::Builtin()
                   .ParsePolicy("scorers: [{name: constant}]\npicker: {name: argmin}")
                   .has_value());
}

TEST(RegistryTest, EffectiveConfigListsDefaultsAndReparsesToTheSamePolicy) {
  auto p = BuiltinPolicy("llmd_sticky");
  ASSERT_TRUE(p.has_value());
  const std::string& text = (*p)->effective_config();
  EXPECT_NE(text.find("if_all_dropped: keep_all"), std::string::npos) << text;
  EXPECT_NE(text.find("token_limit: 4194304"), std::string::npos) << text;
  EXPECT_NE(text.find("weight: 1"), std::string::npos) << text;
  auto again = Registry::Builtin().ParsePolicy(text);
  ASSERT_TRUE(again.has_value()) << again.error().message;
  EXPECT_EQ((*again)->effective_config(), text);
}

}  // namespace
}  // namespace kvroute::sched
