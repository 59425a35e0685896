#include "base/error.h"

#include <gtest/gtest.h>

#include "base/error_test_support.h"

namespace gpumux {
namespace {

TEST(Error, EachCodeHasOneExitStatusAndOneHttpStatus) {
  EXPECT_EQ(ExitCode(ErrorCode::kBadInput), 2);
  EXPECT_EQ(ExitCode(ErrorCode::kNotFound), 2);
  EXPECT_EQ(ExitCode(ErrorCode::kDoesNotFit), 3);
  EXPECT_EQ(ExitCode(ErrorCode::kUnavailable), 4);
  EXPECT_EQ(ExitCode(ErrorCode::kInternal), 1);
  EXPECT_EQ(HttpStatus(ErrorCode::kBadInput), 400);
  EXPECT_EQ(HttpStatus(ErrorCode::kPermissionDenied), 403);
  EXPECT_EQ(HttpStatus(ErrorCode::kNotFound), 404);
  EXPECT_EQ(HttpStatus(ErrorCode::kDoesNotFit), 409);
  EXPECT_EQ(HttpStatus(ErrorCode::kUnavailable), 503);
  EXPECT_EQ(HttpStatus(ErrorCode::kInternal), 500);
}

TEST(Error, AClientReadsBackTheCodeGpumuxdAnsweredWith) {
  for (ErrorCode c : {ErrorCode::kBadInput, ErrorCode::kNotFound, ErrorCode::kPermissionDenied,
                      ErrorCode::kUnavailable, ErrorCode::kInternal}) {
    EXPECT_EQ(ErrorCodeForHttpStatus(HttpStatus(c)), c);
  }
  // 409 is "does not fit" or "conflict": both are exit 3.
  EXPECT_EQ(ExitCode(ErrorCodeForHttpStatus(HttpStatus(ErrorCode::kDoesNotFit))), 3);
  EXPECT_EQ(ErrorCodeForHttpStatus(413), ErrorCode::kBadInput);
}

TEST(Error, WithinKeepsTheCodeAndPutsTheContextFirst) {
  Error e = DoesNotFit("quotas would sum past the GPU").Within("tenant 'a'");
  EXPECT_EQ(e.code(), ErrorCode::kDoesNotFit);
  EXPECT_STREQ(e.what(), "tenant 'a': quotas would sum past the GPU");
  EXPECT_EQ(ErrorCodeOf([] { throw Unavailable("x"); }), ErrorCode::kUnavailable);
  EXPECT_EQ(ErrorCodeOf([] {}), std::nullopt);
}

}  // namespace
}  // namespace gpumux
