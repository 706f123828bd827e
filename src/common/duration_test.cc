#include "common/duration.h"

#include <gtest/gtest.h>

namespace kvroute {
namespace {

TEST(DurationTest, UnitsScaleTheNumber) {
  EXPECT_EQ(*ParseDuration("120s"), std::chrono::seconds(120));
  EXPECT_EQ(*ParseDuration("500ms"), std::chrono::milliseconds(500));
  EXPECT_EQ(*ParseDuration("250us"), std::chrono::microseconds(250));
  EXPECT_EQ(*ParseDuration("7ns"), Nanos(7));
  EXPECT_EQ(*ParseDuration("2m"), std::chrono::minutes(2));
  EXPECT_EQ(*ParseDuration("1h"), std::chrono::hours(1));
}

TEST(DurationTest, NoUnitMeansSeconds) {
  EXPECT_EQ(*ParseDuration("1.5"), std::chrono::milliseconds(1500));
  EXPECT_EQ(*ParseDuration(" 2 "), std::chrono::seconds(2));
}

TEST(DurationTest, BadTextIsAnErrorNamingIt) {
  for (const char* bad : {"soon", "-3s", "", "s", "1.5x", "nan", "inf"}) {
    auto d = ParseDuration(bad);
    EXPECT_FALSE(d.has_value()) << bad;
  }
  EXPECT_NE(ParseDuration("soon").error().find("'soon'"), std::string::npos);
}

}  // namespace
}  // namespace kvroute
