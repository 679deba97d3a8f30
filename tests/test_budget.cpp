// vit serve's budgets (apps/serve/budget.h): what is taken as a Lease comes back exactly once, whether its
// holder gives it back or its last copy goes, and a budget refuses what would pass its limit.
#include <gtest/gtest.h>

#include <functional>
#include <thread>
#include <vector>

#include "apps/serve/budget.h"

namespace vit::app {
namespace {

TEST(Budget, RefusesWhatWouldPassItsLimitTakingNothing) {
  Budget b(100);
  std::optional<Budget::Lease> a = b.lease(60);
  ASSERT_TRUE(a);
  EXPECT_EQ(a->amount(), 60);
  EXPECT_FALSE(b.lease(41));
  EXPECT_EQ(b.used(), 60);
  EXPECT_TRUE(b.lease(40));  // taken and, the lease a temporary, given back at once
  EXPECT_EQ(b.used(), 60);
}

TEST(Budget, ALeaseIsGivenBackOnceByItsHolderOrItsLastCopy) {
  Budget b(100);
  {
    Budget::Lease l = *b.lease(30);
    Budget::Lease copy = l;
    l.give_back();
    EXPECT_EQ(b.used(), 0);
    copy.give_back();  // the same holding: not given twice
    l.give_back();
    EXPECT_EQ(b.used(), 0);
  }
  EXPECT_EQ(b.used(), 0);
  std::function<void()> callback;
  {
    Budget::Lease l = *b.lease(30);
    callback = [l] { (void)l; };  // a queue keeps a copy
    EXPECT_EQ(b.used(), 30);
  }
  EXPECT_EQ(b.used(), 30);  // the callback still holds it
  callback = nullptr;       // dropped unrun: given back by itself
  EXPECT_EQ(b.used(), 0);
  Budget::Lease none;  // holds nothing
  none.give_back();
  EXPECT_EQ(none.amount(), 0);
}

TEST(Budget, LeasesFromManyThreadsComeBackWhole) {
  Budget b(1000);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&b] {
      for (int i = 0; i < 10000; ++i) {
        std::optional<Budget::Lease> l = b.lease(1 + i % 7);
        if (!l) continue;
        Budget::Lease shared = *l;
        if (i % 2) shared.give_back();
      }
    });
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(b.used(), 0);
}

}  // namespace
}  // namespace vit::app
