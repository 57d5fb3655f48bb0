// The input decoder (include/tessera/core/input_bytes.h): gzip is decompressed (one member or
// several), anything else passes unchanged, truncated / corrupt / oversized gzip is an error that
// names the source, and DescribeBytes says what an unreadable file looks like.
#include "tessera/core/input_bytes.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <string_view>

#define ZLIB_CONST
#include <zlib.h>

namespace tessera {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

// gzip of `text` made with zlib's deflate (the decoder under test only inflates).
std::string Gzip(std::string_view text) {
  z_stream z{};
  EXPECT_EQ(deflateInit2(&z, 9, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY), Z_OK);
  std::string out(deflateBound(&z, static_cast<uLong>(text.size())) + 64, '\0');
  z.next_in = reinterpret_cast<const Bytef*>(text.data());
  z.avail_in = static_cast<uInt>(text.size());
  z.next_out = reinterpret_cast<Bytef*>(out.data());
  z.avail_out = static_cast<uInt>(out.size());
  EXPECT_EQ(deflate(&z, Z_FINISH), Z_STREAM_END);
  out.resize(z.total_out);
  deflateEnd(&z);
  return out;
}

// `printf 'hello\n' | gzip -9n`: made by gzip(1), not by the zlib the decoder uses.
const std::string kHelloFromGzipTool("\x1f\x8b\x08\x00\x00\x00\x00\x00\x02\x03\xcb\x48\xcd\xc9\xc9\xe7"
                                     "\x02\x00\x20\x30\x3a\x36\x06\x00\x00\x00",
                                     26);

TEST(DecompressIfGzip, PlainBytesPassUnchanged) {
  for (const std::string& plain : {std::string("{\"tenant\":\"a\"}\n"), std::string(), std::string("\x1f"),
                                   std::string("\x1f\x8a rest", 7), std::string("timestamp,value\n")}) {
    auto out = DecompressIfGzip(plain, "x");
    ASSERT_TRUE(out.ok()) << out.status().ToString();
    EXPECT_EQ(*out, plain);
  }
  EXPECT_FALSE(IsGzip("{"));
  EXPECT_TRUE(IsGzip(kHelloFromGzipTool));
}

TEST(DecompressIfGzip, DecompressesWhatGzipWrites) {
  auto out = DecompressIfGzip(kHelloFromGzipTool, "hello.gz");
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ(*out, "hello\n");
  // Larger than one output chunk (256 KiB) and not very compressible.
  std::string big;
  for (int64_t i = 0; big.size() < 1'500'000; ++i) big += std::to_string(i * 7919 % 100003) + ",";
  auto round = DecompressIfGzip(Gzip(big), "big.gz");
  ASSERT_TRUE(round.ok()) << round.status().ToString();
  EXPECT_EQ(*round, big);
}

TEST(DecompressIfGzip, JoinsConcatenatedMembersAndIgnoresZeroPadding) {
  auto out = DecompressIfGzip(Gzip("a\n") + kHelloFromGzipTool + Gzip("b\n") + std::string(8, '\0'), "cat.gz");
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ(*out, "a\nhello\nb\n");
  auto empty_member = DecompressIfGzip(Gzip(""), "empty.gz");
  ASSERT_TRUE(empty_member.ok());
  EXPECT_EQ(*empty_member, "");
}

TEST(DecompressIfGzip, TruncatedGzipIsAnErrorNamingTheSource) {
  const std::string whole = Gzip("{\"tenant\":\"a\"}\n{\"tenant\":\"b\"}\n");
  auto cut = DecompressIfGzip(std::string_view(whole).substr(0, whole.size() - 4), "ledger.jsonl.gz");
  EXPECT_EQ(cut.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(cut.status().message(), "ledger.jsonl.gz: gzip data is truncated (the stream ends after " +
                                        std::to_string(whole.size() - 4) + " of its bytes)");
  // Every shorter prefix that still starts with the magic number fails the same way.
  for (size_t n = 2; n < whole.size(); ++n) {
    auto r = DecompressIfGzip(std::string_view(whole).substr(0, n), "ledger.jsonl.gz");
    ASSERT_FALSE(r.ok()) << n;
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << n;
    EXPECT_THAT(r.status().message(), StartsWith("ledger.jsonl.gz: gzip data is truncated")) << n;
  }
}

TEST(DecompressIfGzip, CorruptGzipAndTrailingBytesAreErrors) {
  std::string bad_crc = kHelloFromGzipTool;
  bad_crc[bad_crc.size() - 8] ^= 0x01;  // the CRC-32 of the trailer
  auto crc = DecompressIfGzip(bad_crc, "x.gz");
  EXPECT_EQ(crc.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(crc.status().message(), StartsWith("x.gz: corrupt gzip data near byte "));
  EXPECT_THAT(crc.status().message(), HasSubstr("incorrect data check"));

  std::string bad_method = kHelloFromGzipTool;
  bad_method[2] = 0x07;  // not deflate
  EXPECT_THAT(DecompressIfGzip(bad_method, "x.gz").status().message(), StartsWith("x.gz: corrupt gzip data"));

  auto garbage = DecompressIfGzip(kHelloFromGzipTool + "tail", "x.gz");
  EXPECT_EQ(garbage.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(garbage.status().message(),
            "x.gz: 4 bytes after the end of the gzip data (at byte 26) are not another gzip member");
}

TEST(DecompressIfGzip, OutputIsBounded) {
  const std::string zeros = Gzip(std::string(10'000, '0'));
  auto over = DecompressIfGzip(zeros, "bomb.gz", {.max_output_bytes = 9'999});
  EXPECT_EQ(over.status().code(), StatusCode::kResourceExhausted);
  EXPECT_THAT(over.status().message(), StartsWith("bomb.gz: decompresses to more than 9999 bytes (the limit)"));
  auto exact = DecompressIfGzip(zeros, "bomb.gz", {.max_output_bytes = 10'000});
  ASSERT_TRUE(exact.ok()) << exact.status().ToString();
  EXPECT_EQ(exact->size(), 10'000u);
  EXPECT_EQ(DecompressOptions{}.max_output_bytes, uint64_t{4} << 30);
}

TEST(DescribeBytes, SaysWhatAFileLooksLike) {
  EXPECT_EQ(DescribeBytes(kHelloFromGzipTool), "gzip-compressed data");
  EXPECT_EQ(DescribeBytes("PK\x03\x04rest"), "zip-compressed data");
  EXPECT_EQ(DescribeBytes("\xfd" "7zXZ"), "xz-compressed data");
  EXPECT_EQ(DescribeBytes("\x28\xb5\x2f\xfd"), "zstd-compressed data");
  EXPECT_EQ(DescribeBytes(std::string("ab\0cd", 5)), "binary data");
  EXPECT_EQ(DescribeBytes("tenant,hour,gpus\nvision,0,2\n"), "CSV (commas, no '{')");
  EXPECT_EQ(DescribeBytes("\xEF\xBB\xBFtimestamp,value\r\n"), "CSV (commas, no '{')");
  EXPECT_EQ(DescribeBytes("[{\"tenant\":\"a\"}]"), "a JSON array (not one object per line)");
  EXPECT_EQ(DescribeBytes("{\n  \"tenant\": \"a\"\n}\n"), "a JSON object spread over several lines (not one object per line)");
  EXPECT_EQ(DescribeBytes("{\"tenant\":\"a\",\"seq\":1"), "");  // JSON-like: the parser's own error says more
  EXPECT_EQ(DescribeBytes("hello world"), "");
  EXPECT_EQ(DescribeBytes(""), "");
}

}  // namespace
}  // namespace tessera
