// A small, strict CSV reader (RFC 4180 subset) for trace files. Every field remembers its line
// and column so that callers can report "pods.csv:12:17: cpu_milli: ..." on bad input.
//
//   StatusOr<CsvTable> t = ParseCsv("a,b\n1,\"x,y\"\n", "in.csv");
//   t->header == {"a", "b"}; t->rows[0].fields[1] == "x,y"; t->rows[0].line == 2;
//
// Accepts LF or CRLF line ends, quoted fields with "" escapes, a missing final newline; skips
// blank lines. Rejects: no header, an empty or duplicate header name, a row with the wrong
// number of fields, an unterminated quote, text after a closing quote, NUL bytes, lines over
// 64 KiB. Errors are INVALID_ARGUMENT with "path:line:column: what".
//
// Thread-safety: pure functions.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "tessera/core/status.h"

namespace tessera::sim {

struct CsvRow {
  int line = 0;                // 1-based line of the row's first character
  std::vector<std::string> fields;
  std::vector<int> columns;    // 1-based character column where each field starts
};

struct CsvTable {
  std::string path;            // as given, used in messages
  std::vector<std::string> header;
  std::vector<CsvRow> rows;

  // Index of a header column, or nullopt.
  std::optional<size_t> ColumnIndex(std::string_view name) const;
  // "path:line:column: message" for field `col` of `row`.
  std::string Where(const CsvRow& row, size_t col) const;
};

StatusOr<CsvTable> ParseCsv(std::string_view text, std::string_view path);
// NOT_FOUND if the file cannot be opened (message names the path and the OS error).
StatusOr<CsvTable> ReadCsvFile(const std::string& path);

}  // namespace tessera::sim
