// Status and Expected: failures propagate with their message unchanged
// through TERA_RETURN_IF_ERROR and Expected::status().
#include <gtest/gtest.h>

#include <string>

#include "core/status.h"

namespace tera {
namespace {

int calls_after = 0;

Status fail_if(bool fail) { return fail ? Status::error("config.toml: train.lr must be > 0") : Status(); }

Status two_steps(bool fail_first) {
  TERA_RETURN_IF_ERROR(fail_if(fail_first));
  ++calls_after;
  TERA_RETURN_IF_ERROR(fail_if(false));
  return Status::error("reached the end");
}

Expected<int> parse_positive(int v) {
  if (v <= 0) return Status::error("value " + std::to_string(v) + " must be positive");
  return v;
}

Status use(int v, int* out) {
  auto e = parse_positive(v);
  TERA_RETURN_IF_ERROR(e.status());
  *out = *e;
  return Status();
}

TEST(Status, DefaultIsOk) {
  const Status s;
  EXPECT_TRUE(s.is_ok());
  EXPECT_TRUE(static_cast<bool>(s));
  EXPECT_TRUE(s.message().empty());
}

TEST(Status, ReturnIfErrorStopsAtTheFirstFailure) {
  calls_after = 0;
  const Status s = two_steps(/*fail_first=*/true);
  EXPECT_FALSE(s.is_ok());
  EXPECT_EQ(s.message(), "config.toml: train.lr must be > 0");
  EXPECT_EQ(calls_after, 0);
}

TEST(Status, ReturnIfErrorContinuesOnSuccess) {
  calls_after = 0;
  const Status s = two_steps(/*fail_first=*/false);
  EXPECT_EQ(calls_after, 1);
  EXPECT_EQ(s.message(), "reached the end");
}

TEST(Status, ExpectedCarriesValueOrError) {
  auto good = parse_positive(3);
  ASSERT_TRUE(good.ok());
  EXPECT_EQ(*good, 3);
  EXPECT_TRUE(good.status().is_ok());
  EXPECT_TRUE(good.error().empty());
  auto bad = parse_positive(-1);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error(), "value -1 must be positive");
  EXPECT_EQ(bad.status().message(), "value -1 must be positive");
}

TEST(Status, ExpectedStatusPropagates) {
  int out = 0;
  EXPECT_TRUE(use(5, &out).is_ok());
  EXPECT_EQ(out, 5);
  const Status s = use(0, &out);
  EXPECT_FALSE(s.is_ok());
  EXPECT_EQ(s.message(), "value 0 must be positive");
  EXPECT_EQ(out, 5);
}

TEST(StatusDeathTest, ValueOfAnErrorAsserts) {
  auto bad = parse_positive(-2);
  EXPECT_DEATH((void)bad.value(), "value -2 must be positive");
}

}  // namespace
}  // namespace tera
