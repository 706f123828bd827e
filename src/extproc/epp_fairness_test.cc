// The fairness rule (epp_fairness.h): who is over its share of a saturated pool.
#include "extproc/epp_fairness.h"

#include <gtest/gtest.h>

namespace kvroute::extproc {
namespace {

void AdmitN(FairShareLedger& l, int priority, const std::string& id, int n) {
  for (int i = 0; i < n; ++i) ASSERT_FALSE(l.Admit(priority, id, /*saturated=*/false).over);
}

TEST(FairShareLedger, ATenantOverItsShareIsRefusedWhileOthersAreAdmitted) {
  FairShareLedger l;
  AdmitN(l, 0, "a", 5);
  AdmitN(l, 0, "b", 1);
  // n = 6, k = 2, share 3: a holds 5.
  FairShareVerdict a = l.Admit(0, "a", /*saturated=*/true);
  EXPECT_TRUE(a.over);
  EXPECT_EQ(a.held, 5);
  EXPECT_EQ(a.in_flight, 6);
  EXPECT_EQ(a.ids, 2);
  EXPECT_DOUBLE_EQ(a.share, 3.0);
  EXPECT_EQ(l.InFlight(0, "a"), 5);  // a refused request is not counted
  EXPECT_FALSE(l.Admit(0, "b", true).over);
  EXPECT_EQ(l.InFlight(0, "b"), 2);
  // A newcomer holds nothing: always within its share (n = 7, k = 3).
  FairShareVerdict c = l.Admit(0, "c", true);
  EXPECT_FALSE(c.over);
  EXPECT_EQ(c.ids, 3);
}

TEST(FairShareLedger, RoomMeansNoRationingAndOneTenantAloneIsNeverOver) {
  FairShareLedger l;
  AdmitN(l, 0, "a", 8);
  AdmitN(l, 0, "b", 1);
  EXPECT_FALSE(l.Admit(0, "a", /*saturated=*/false).over);  // room: no fairness applies
  FairShareLedger alone;
  AdmitN(alone, 0, "a", 8);
  EXPECT_FALSE(alone.Admit(0, "a", true).over);  // k = 1
}

TEST(FairShareLedger, EqualHoldersAreAllAdmittedAndTheShareIsPerPriority) {
  FairShareLedger l;
  AdmitN(l, 0, "a", 3);
  AdmitN(l, 0, "b", 3);
  EXPECT_FALSE(l.Admit(0, "a", true).over);  // 3 is not more than 3
  // Priority 10's requests are another pool of shares: a's count at 0 does not matter there.
  AdmitN(l, 10, "b", 1);
  EXPECT_FALSE(l.Admit(10, "a", true).over);
  EXPECT_TRUE(l.Admit(0, "a", true).over);  // now 4 of 7 at priority 0 (share 3.5)
}

TEST(FairShareLedger, ReleaseBringsATenantBackWithinItsShare) {
  FairShareLedger l;
  AdmitN(l, 0, "a", 3);
  AdmitN(l, 0, "", 1);  // requests without a fairness id: one default flow
  EXPECT_TRUE(l.Admit(0, "a", true).over);  // 3 of 4, share 2
  l.Release(0, "a");
  EXPECT_TRUE(l.Admit(0, "a", true).over);  // 2 of 3, share 1.5
  l.Release(0, "a");
  EXPECT_FALSE(l.Admit(0, "a", true).over);  // 1 of 2, share 1
  EXPECT_EQ(l.InFlight(0, "a"), 2);
  l.Release(0, "nobody");  // unknown ids and priorities are ignored
  l.Release(5, "a");
  EXPECT_EQ(l.InFlight(0, ""), 1);
}

}  // namespace
}  // namespace kvroute::extproc
