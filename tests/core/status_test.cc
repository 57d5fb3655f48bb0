#include "tessera/core/status.h"

#include <memory>
#include <string>
#include <utility>

#include <gtest/gtest.h>

namespace tessera {
namespace {

TEST(StatusTest, DefaultIsOk) {
  Status s;
  EXPECT_TRUE(s.ok());
  EXPECT_EQ(s.code(), StatusCode::kOk);
  EXPECT_EQ(s.message(), "");
  EXPECT_EQ(s.ToString(), "OK");
  EXPECT_EQ(Status::Ok(), Status());
}

TEST(StatusTest, CodeNamesMatchAbseil) {
  EXPECT_EQ(StatusCodeName(StatusCode::kOk), "OK");
  EXPECT_EQ(StatusCodeName(StatusCode::kCancelled), "CANCELLED");
  EXPECT_EQ(StatusCodeName(StatusCode::kUnknown), "UNKNOWN");
  EXPECT_EQ(StatusCodeName(StatusCode::kInvalidArgument), "INVALID_ARGUMENT");
  EXPECT_EQ(StatusCodeName(StatusCode::kDeadlineExceeded), "DEADLINE_EXCEEDED");
  EXPECT_EQ(StatusCodeName(StatusCode::kNotFound), "NOT_FOUND");
  EXPECT_EQ(StatusCodeName(StatusCode::kAlreadyExists), "ALREADY_EXISTS");
  EXPECT_EQ(StatusCodeName(StatusCode::kPermissionDenied), "PERMISSION_DENIED");
  EXPECT_EQ(StatusCodeName(StatusCode::kResourceExhausted), "RESOURCE_EXHAUSTED");
  EXPECT_EQ(StatusCodeName(StatusCode::kFailedPrecondition), "FAILED_PRECONDITION");
  EXPECT_EQ(StatusCodeName(StatusCode::kAborted), "ABORTED");
  EXPECT_EQ(StatusCodeName(StatusCode::kOutOfRange), "OUT_OF_RANGE");
  EXPECT_EQ(StatusCodeName(StatusCode::kUnimplemented), "UNIMPLEMENTED");
  EXPECT_EQ(StatusCodeName(StatusCode::kInternal), "INTERNAL");
  EXPECT_EQ(StatusCodeName(StatusCode::kUnavailable), "UNAVAILABLE");
  EXPECT_EQ(StatusCodeName(StatusCode::kDataLoss), "DATA_LOSS");
  EXPECT_EQ(StatusCodeName(StatusCode::kUnauthenticated), "UNAUTHENTICATED");
  EXPECT_EQ(StatusCodeName(static_cast<StatusCode>(99)), "UNKNOWN");
}

TEST(StatusTest, CodeValuesAreCanonical) {
  EXPECT_EQ(static_cast<int>(StatusCode::kInvalidArgument), 3);
  EXPECT_EQ(static_cast<int>(StatusCode::kNotFound), 5);
  EXPECT_EQ(static_cast<int>(StatusCode::kResourceExhausted), 8);
  EXPECT_EQ(static_cast<int>(StatusCode::kUnauthenticated), 16);
}

TEST(StatusTest, ErrorFactoriesSetCodeAndMessage) {
  struct Case {
    Status status;
    StatusCode code;
  };
  const Case cases[] = {
      {InvalidArgumentError("m"), StatusCode::kInvalidArgument},
      {NotFoundError("m"), StatusCode::kNotFound},
      {OutOfRangeError("m"), StatusCode::kOutOfRange},
      {FailedPreconditionError("m"), StatusCode::kFailedPrecondition},
      {ResourceExhaustedError("m"), StatusCode::kResourceExhausted},
      {InternalError("m"), StatusCode::kInternal},
      {UnimplementedError("m"), StatusCode::kUnimplemented},
      {AlreadyExistsError("m"), StatusCode::kAlreadyExists},
      {UnavailableError("m"), StatusCode::kUnavailable},
      {DataLossError("m"), StatusCode::kDataLoss},
  };
  for (const Case& c : cases) {
    EXPECT_FALSE(c.status.ok());
    EXPECT_EQ(c.status.code(), c.code);
    EXPECT_EQ(c.status.message(), "m");
  }
}

TEST(StatusTest, ToStringIsCodeColonMessage) {
  EXPECT_EQ(InvalidArgumentError("pods.csv:12:3: cpu_milli: negative value -5").ToString(),
            "INVALID_ARGUMENT: pods.csv:12:3: cpu_milli: negative value -5");
  EXPECT_EQ(NotFoundError("").ToString(), "NOT_FOUND: ");
}

TEST(StatusTest, WithPrefixKeepsCodeAndPrependsPrefix) {
  const Status s = NotFoundError("no such file").WithPrefix("loading pods.csv");
  EXPECT_EQ(s.code(), StatusCode::kNotFound);
  EXPECT_EQ(s.message(), "loading pods.csv: no such file");
  EXPECT_EQ(s.ToString(), "NOT_FOUND: loading pods.csv: no such file");
  // Prefixes nest outermost first.
  EXPECT_EQ(s.WithPrefix("sweep").message(), "sweep: loading pods.csv: no such file");
}

TEST(StatusTest, WithPrefixOnOkStaysOk) {
  const Status s = Status::Ok().WithPrefix("ignored");
  EXPECT_TRUE(s.ok());
  EXPECT_EQ(s.message(), "");
  EXPECT_EQ(s.ToString(), "OK");
}

TEST(StatusTest, EqualityComparesCodeAndMessage) {
  EXPECT_EQ(InternalError("x"), InternalError("x"));
  EXPECT_FALSE(InternalError("x") == InternalError("y"));
  EXPECT_FALSE(InternalError("x") == Status(StatusCode::kUnknown, "x"));
  EXPECT_FALSE(InternalError("x") == DataLossError("x"));
  EXPECT_EQ(Status(StatusCode::kAborted, "a").code(), StatusCode::kAborted);
}

TEST(StatusOrTest, HoldsValue) {
  StatusOr<int> v = 42;
  ASSERT_TRUE(v.ok());
  EXPECT_TRUE(v.status().ok());
  EXPECT_EQ(v.value(), 42);
  EXPECT_EQ(*v, 42);
  *v = 7;
  EXPECT_EQ(v.value(), 7);
}

TEST(StatusOrTest, HoldsError) {
  StatusOr<int> v = NotFoundError("gone");
  EXPECT_FALSE(v.ok());
  EXPECT_EQ(v.status().code(), StatusCode::kNotFound);
  EXPECT_EQ(v.status().message(), "gone");
}

TEST(StatusOrTest, OkStatusWithoutValueBecomesInternal) {
  StatusOr<int> v = Status::Ok();
  EXPECT_FALSE(v.ok());
  EXPECT_EQ(v.status().code(), StatusCode::kInternal);
  const Status ok;
  StatusOr<std::string> w(ok);
  EXPECT_FALSE(w.ok());
  EXPECT_EQ(w.status().code(), StatusCode::kInternal);
}

TEST(StatusOrTest, ArrowAndMoveOnlyValues) {
  StatusOr<std::string> s = std::string("hello");
  EXPECT_EQ(s->size(), 5u);
  StatusOr<std::unique_ptr<int>> p = std::make_unique<int>(9);
  ASSERT_TRUE(p.ok());
  std::unique_ptr<int> taken = std::move(p).value();
  ASSERT_NE(taken, nullptr);
  EXPECT_EQ(*taken, 9);
}

// --- macros -------------------------------------------------------------------------------

int g_steps = 0;

Status Step(bool fail) {
  ++g_steps;
  return fail ? FailedPreconditionError("step failed") : Status::Ok();
}

Status TwoSteps(bool fail_first, bool fail_second) {
  TESSERA_RETURN_IF_ERROR(Step(fail_first));
  TESSERA_RETURN_IF_ERROR(Step(fail_second));
  return InternalError("reached the end");
}

TEST(StatusMacrosTest, ReturnIfErrorStopsAtFirstError) {
  g_steps = 0;
  Status s = TwoSteps(true, false);
  EXPECT_EQ(s, FailedPreconditionError("step failed"));
  EXPECT_EQ(g_steps, 1);

  g_steps = 0;
  s = TwoSteps(false, true);
  EXPECT_EQ(s, FailedPreconditionError("step failed"));
  EXPECT_EQ(g_steps, 2);

  g_steps = 0;
  s = TwoSteps(false, false);
  EXPECT_EQ(s, InternalError("reached the end"));
  EXPECT_EQ(g_steps, 2);
}

StatusOr<int> Parse(int v) {
  if (v < 0) return InvalidArgumentError("negative " + std::to_string(v));
  return v * 10;
}

StatusOr<int> SumParsed(int a, int b) {
  TESSERA_ASSIGN_OR_RETURN(int x, Parse(a));  // declares
  int y = 0;
  TESSERA_ASSIGN_OR_RETURN(y, Parse(b));      // assigns
  return x + y;
}

TEST(StatusMacrosTest, AssignOrReturnDeclaresAssignsAndPropagates) {
  StatusOr<int> ok = SumParsed(1, 2);
  ASSERT_TRUE(ok.ok());
  EXPECT_EQ(*ok, 30);

  StatusOr<int> first = SumParsed(-1, 2);
  EXPECT_EQ(first.status(), InvalidArgumentError("negative -1"));
  StatusOr<int> second = SumParsed(1, -2);
  EXPECT_EQ(second.status(), InvalidArgumentError("negative -2"));
}

StatusOr<std::unique_ptr<int>> MakeBox(int v) { return std::make_unique<int>(v); }

Status UseBox(int v, int* out) {
  TESSERA_ASSIGN_OR_RETURN(std::unique_ptr<int> box, MakeBox(v));
  *out = *box;
  return Status::Ok();
}

TEST(StatusMacrosTest, AssignOrReturnMovesMoveOnlyValues) {
  int out = 0;
  ASSERT_TRUE(UseBox(5, &out).ok());
  EXPECT_EQ(out, 5);
}

}  // namespace
}  // namespace tessera
