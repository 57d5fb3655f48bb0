#include "tessera/sim/csv.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "tests/testing/sim_test_util.h"

namespace tessera::sim {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

CsvTable MustParse(std::string_view text) {
  StatusOr<CsvTable> t = ParseCsv(text, "in.csv");
  EXPECT_TRUE(t.ok()) << t.status().ToString();
  return t.ok() ? *t : CsvTable{};
}

Status ParseError(std::string_view text) {
  StatusOr<CsvTable> t = ParseCsv(text, "in.csv");
  EXPECT_FALSE(t.ok()) << "parsed: " << text;
  if (t.ok()) return Status::Ok();
  EXPECT_EQ(t.status().code(), StatusCode::kInvalidArgument) << t.status().ToString();
  return t.status();
}

TEST(CsvTest, HeaderAndRowsWithLinesAndColumns) {
  CsvTable t = MustParse("a,bb,c\n1,22,333\n4,,6\n");
  EXPECT_EQ(t.path, "in.csv");
  EXPECT_EQ(t.header, (std::vector<std::string>{"a", "bb", "c"}));
  ASSERT_EQ(t.rows.size(), 2u);
  EXPECT_EQ(t.rows[0].fields, (std::vector<std::string>{"1", "22", "333"}));
  EXPECT_EQ(t.rows[0].line, 2);
  EXPECT_EQ(t.rows[0].columns, (std::vector<int>{1, 3, 6}));
  EXPECT_EQ(t.rows[1].fields, (std::vector<std::string>{"4", "", "6"}));
  EXPECT_EQ(t.rows[1].line, 3);
  EXPECT_EQ(t.rows[1].columns, (std::vector<int>{1, 3, 4}));
  EXPECT_EQ(t.ColumnIndex("bb"), 1u);
  EXPECT_EQ(t.ColumnIndex("zz"), std::nullopt);
  EXPECT_EQ(t.Where(t.rows[0], 2), "in.csv:2:6");
  EXPECT_EQ(t.Where(t.rows[0], 99), "in.csv:2:1");  // out of range: column 1
}

TEST(CsvTest, QuotedFieldsWithCommasAndEscapedQuotes) {
  CsvTable t = MustParse("a,b\n1,\"x,y\"\n\"say \"\"hi\"\"\",\"\"\n");
  ASSERT_EQ(t.rows.size(), 2u);
  EXPECT_EQ(t.rows[0].fields[1], "x,y");
  EXPECT_EQ(t.rows[0].columns[1], 3);
  EXPECT_EQ(t.rows[1].fields[0], "say \"hi\"");
  EXPECT_EQ(t.rows[1].fields[1], "");
  // The opening quote's column: "say ""hi""" spans columns 1..12, the comma is 13.
  EXPECT_EQ(t.rows[1].columns[1], 14);
}

TEST(CsvTest, QuotedFieldMaySpanLines) {
  CsvTable t = MustParse("a,b\n\"x\ny\",2\n3,4\n");
  ASSERT_EQ(t.rows.size(), 2u);
  EXPECT_EQ(t.rows[0].fields[0], "x\ny");
  EXPECT_EQ(t.rows[0].line, 2);
  EXPECT_EQ(t.rows[0].columns[1], 4);  // `y",` ends the field on line 3
  EXPECT_EQ(t.rows[1].line, 4);
}

TEST(CsvTest, CrlfLineEnds) {
  CsvTable t = MustParse("a,b\r\n1,2\r\n3,\"4\"\r\n");
  EXPECT_EQ(t.header, (std::vector<std::string>{"a", "b"}));
  ASSERT_EQ(t.rows.size(), 2u);
  EXPECT_EQ(t.rows[0].fields, (std::vector<std::string>{"1", "2"}));
  EXPECT_EQ(t.rows[1].fields, (std::vector<std::string>{"3", "4"}));
  EXPECT_EQ(t.rows[1].line, 3);
}

TEST(CsvTest, MissingFinalNewline) {
  CsvTable t = MustParse("a,b\n1,2");
  ASSERT_EQ(t.rows.size(), 1u);
  EXPECT_EQ(t.rows[0].fields, (std::vector<std::string>{"1", "2"}));
  CsvTable q = MustParse("a,b\n1,\"2\"");
  ASSERT_EQ(q.rows.size(), 1u);
  EXPECT_EQ(q.rows[0].fields[1], "2");
  CsvTable crlf = MustParse("a,b\r\n1,2\r");
  ASSERT_EQ(crlf.rows.size(), 1u);
  EXPECT_EQ(crlf.rows[0].fields[1], "2");
}

TEST(CsvTest, BlankLinesAreSkippedAndLineNumbersKept) {
  CsvTable t = MustParse("\n\na,b\n\n1,2\r\n\r\n\n3,4\n\n");
  EXPECT_EQ(t.header, (std::vector<std::string>{"a", "b"}));
  ASSERT_EQ(t.rows.size(), 2u);
  EXPECT_EQ(t.rows[0].line, 5);
  EXPECT_EQ(t.rows[1].line, 8);
}

TEST(CsvTest, ByteOrderMarkIsStripped) {
  CsvTable t = MustParse("\xEF\xBB\xBF" "name,x\nn,1\n");
  EXPECT_EQ(t.header, (std::vector<std::string>{"name", "x"}));
  EXPECT_EQ(t.ColumnIndex("name"), 0u);
  ASSERT_EQ(t.rows.size(), 1u);
  EXPECT_EQ(t.rows[0].columns[0], 1);
}

TEST(CsvTest, HeaderOnlyIsAValidEmptyTable) {
  CsvTable t = MustParse("a,b\n");
  EXPECT_EQ(t.header.size(), 2u);
  EXPECT_TRUE(t.rows.empty());
}

TEST(CsvTest, UnterminatedQuote) {
  Status s = ParseError("a,b\n1,\"xy\n");
  EXPECT_THAT(s.message(), StartsWith("in.csv:2:3: "));
  EXPECT_THAT(s.message(), HasSubstr("unterminated quoted field"));
  // Reported where the field started even when the runaway quote swallowed later lines.
  Status later = ParseError("a,b\n1,2\n3,\"4\n5,6\n7,8\n");
  EXPECT_THAT(later.message(), StartsWith("in.csv:3:3: unterminated"));
}

TEST(CsvTest, TextAfterClosingQuote) {
  Status s = ParseError("a,b\n1,\"x\"y\n");
  EXPECT_THAT(s.message(), StartsWith("in.csv:2:6: "));
  EXPECT_THAT(s.message(), HasSubstr("after closing quote"));
}

TEST(CsvTest, QuoteInsideUnquotedField) {
  Status s = ParseError("a,b\n1,x\"y\n");
  EXPECT_THAT(s.message(), StartsWith("in.csv:2:4: "));
  EXPECT_THAT(s.message(), HasSubstr("quote inside an unquoted field"));
}

TEST(CsvTest, WrongFieldCountNamesTheRightLine) {
  Status few = ParseError("a,b\n1,2\n\n3\n");
  EXPECT_EQ(few.message(), "in.csv:4:1: expected 2 fields, found 1");
  Status many = ParseError("a,b\n1,2\n3,4,5\n");
  EXPECT_EQ(many.message(), "in.csv:3:1: expected 2 fields, found 3");
  // A row after a multi-line quoted field is numbered by its physical line.
  Status after = ParseError("a,b\n\"x\ny\",1\n2\n");
  EXPECT_THAT(after.message(), StartsWith("in.csv:4:1: "));
}

TEST(CsvTest, DuplicateHeaderName) {
  Status s = ParseError("a,b,a\n1,2,3\n");
  EXPECT_EQ(s.message(), "in.csv:1:5: duplicate column 'a' in header");
}

TEST(CsvTest, EmptyHeaderName) {
  Status s = ParseError("a,,b\n1,2,3\n");
  EXPECT_EQ(s.message(), "in.csv:1:3: empty column name in header");
  Status trailing = ParseError("a,b,\n");
  EXPECT_THAT(trailing.message(), StartsWith("in.csv:1:5: empty column name"));
}

TEST(CsvTest, EmptyFile) {
  EXPECT_EQ(ParseError("").message(), "in.csv:1:1: empty file (no header)");
  EXPECT_THAT(ParseError("\n\r\n\n").message(), StartsWith("in.csv:1:1: empty file"));
  EXPECT_THAT(ParseError("\xEF\xBB\xBF").message(), StartsWith("in.csv:1:1: empty file"));
}

TEST(CsvTest, NulByte) {
  using namespace std::string_literals;
  Status s = ParseError("a,b\n1,x\0y\n"s);
  EXPECT_THAT(s.message(), StartsWith("in.csv:2:4: "));
  EXPECT_THAT(s.message(), HasSubstr("NUL"));
  Status quoted = ParseError("a,b\n1,\"x\0\"\n"s);
  EXPECT_THAT(quoted.message(), StartsWith("in.csv:2:5: "));
  EXPECT_THAT(quoted.message(), HasSubstr("NUL"));
  Status header = ParseError("a\0,b\n"s);
  EXPECT_THAT(header.message(), StartsWith("in.csv:1:2: "));
}

TEST(CsvTest, BareCarriageReturnInsideALine) {
  Status s = ParseError("a,b\r1,2\n");
  EXPECT_THAT(s.message(), StartsWith("in.csv:1:4: "));
  EXPECT_THAT(s.message(), HasSubstr("carriage return"));
}

TEST(CsvTest, OverlongLineIsRejected) {
  std::string text = "a\n" + std::string(64 * 1024 + 10, 'x') + "\n";
  Status s = ParseError(text);
  EXPECT_THAT(s.message(), StartsWith("in.csv:2:"));
  EXPECT_THAT(s.message(), HasSubstr("64 KiB"));
  std::string quoted = "a\n\"" + std::string(64 * 1024 + 10, 'x') + "\"\n";
  EXPECT_THAT(ParseError(quoted).message(), HasSubstr("64 KiB"));
  // Just under the limit is fine.
  CsvTable t = MustParse("a\n" + std::string(60 * 1024, 'x') + "\n");
  ASSERT_EQ(t.rows.size(), 1u);
  EXPECT_EQ(t.rows[0].fields[0].size(), 60u * 1024);
}

TEST(CsvTest, ReadCsvFileReadsAFile) {
  testing::TempDir dir;
  const std::string path = dir.File("t.csv");
  testing::WriteTextFile(path, "x,y\n1,2\n");
  StatusOr<CsvTable> t = ReadCsvFile(path);
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_EQ(t->path, path);
  ASSERT_EQ(t->rows.size(), 1u);
  EXPECT_EQ(t->rows[0].fields[1], "2");
}

TEST(CsvTest, ReadCsvFileErrorsNameThePath) {
  testing::TempDir dir;
  const std::string missing = dir.File("no-such.csv");
  StatusOr<CsvTable> t = ReadCsvFile(missing);
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().code(), StatusCode::kNotFound);
  EXPECT_THAT(t.status().message(), StartsWith(missing + ":"));
  EXPECT_THAT(t.status().message(), HasSubstr("cannot open"));

  const std::string bad = dir.File("bad.csv");
  testing::WriteTextFile(bad, "x,y\n1\n");
  StatusOr<CsvTable> b = ReadCsvFile(bad);
  ASSERT_FALSE(b.ok());
  EXPECT_EQ(b.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(b.status().message(), StartsWith(bad + ":2:1: "));
}

}  // namespace
}  // namespace tessera::sim
