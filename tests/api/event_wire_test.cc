// Events and the error envelope (tessera/api/event_wire.h): each subject's event and the envelope
// survive their codec byte for byte; unknown fields and wrong types are refused naming the field.
#include "tessera/api/event_wire.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace tessera::api {
namespace {

std::string FieldOf(StatusOr<Event> (*decode)(std::string_view, std::string*), std::string_view body) {
  std::string field;
  auto got = decode(body, &field);
  if (got.ok()) return "accepted";
  EXPECT_EQ(got.status().code(), StatusCode::kInvalidArgument);
  return field;
}

TEST(EventWireTest, EverySubjectRoundTrips) {
  const std::vector<std::pair<Event, std::string>> cases = {
      {{41, "workload", 7, "", "ml", 1000, "placed", "n1 GPU [0]"},
       R"({"detail":"n1 GPU [0]","id":41,"kind":"placed","tenant":"ml","time_ms":1000,"workload":7})"},
      {{42, "node", 0, "n1", "", 1001, "node.cordoned", ""},
       R"({"detail":"","id":42,"kind":"node.cordoned","node":"n1","time_ms":1001})"},
      {{43, "token", 0, "t9", "", 1002, "token.revoked", ""},
       R"({"detail":"","id":43,"kind":"token.revoked","tenant":null,"time_ms":1002,"token":"t9"})"},
      {{44, "token", 0, "t10", "ml", 1003, "token.created", ""},
       R"({"detail":"","id":44,"kind":"token.created","tenant":"ml","time_ms":1003,"token":"t10"})"},
      {{45, "tenant", 0, "ml", "", 1004, "tenant.created", ""},
       R"({"detail":"","id":45,"kind":"tenant.created","tenant":"ml","time_ms":1004})"}};
  for (const auto& [event, text] : cases) {
    EXPECT_EQ(EncodeEvent(event), text);
    StatusOr<Event> back = DecodeEvent(text, nullptr);
    ASSERT_TRUE(back.ok()) << back.status().message();
    EXPECT_EQ(*back, event) << text;
  }
}

TEST(EventWireTest, RefusalsNameTheField) {
  EXPECT_EQ(FieldOf(DecodeEvent, R"({"id":1,"time_ms":0,"kind":"k","workload":1,"tenant":"a","x":1})"), "x");
  EXPECT_EQ(FieldOf(DecodeEvent, R"({"id":1,"time_ms":0,"kind":"k","workload":"1","tenant":"a"})"), "workload");
  EXPECT_EQ(FieldOf(DecodeEvent, R"({"id":1,"time_ms":0,"kind":"k","workload":1})"), "tenant");
  EXPECT_EQ(FieldOf(DecodeEvent, R"({"id":1,"time_ms":0,"kind":"k","node":"n","token":"t","tenant":null})"), "token");
  EXPECT_EQ(FieldOf(DecodeEvent, R"({"id":1,"kind":"k","node":"n"})"), "time_ms");
}

TEST(EventWireTest, ErrorEnvelopeRoundTripsAndIsStrict) {
  for (const ErrorEnvelope& e : {ErrorEnvelope{"invalid_argument", "gpus: missing", "gpus"},
                                 ErrorEnvelope{"not_found", "", ""}}) {
    const std::string body = EncodeErrorEnvelope(e);
    StatusOr<ErrorEnvelope> back = DecodeErrorEnvelope(body, nullptr);
    ASSERT_TRUE(back.ok()) << back.status().message();
    EXPECT_EQ(*back, e);
    EXPECT_EQ(EncodeErrorEnvelope(*back), body);
  }
  EXPECT_EQ(EncodeErrorEnvelope({"not_found", "no", ""}), R"({"error":{"code":"not_found","message":"no"}})");
  std::string field;
  StatusOr<ErrorEnvelope> bad = DecodeErrorEnvelope(R"({"error":{"code":"x","mesage":"m"}})", &field);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(field, "error.mesage");
  EXPECT_THAT(std::string(bad.status().message()), ::testing::HasSubstr("unknown field"));
  EXPECT_FALSE(DecodeErrorEnvelope(R"({"error":"x"})", nullptr).ok());
  // Invalid UTF-8 in a message (it may quote a client's bytes) is replaced, never thrown on.
  EXPECT_NE(EncodeErrorEnvelope({"invalid_argument", std::string("bad \xff byte"), ""}), "");
}

}  // namespace
}  // namespace tessera::api
