#include "tessera/sim/csv.h"

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <unordered_set>

namespace tessera::sim {
namespace {

constexpr size_t kMaxLineBytes = 64 * 1024;

std::string Loc(std::string_view path, int line, int col) {
  return std::string(path) + ":" + std::to_string(line) + ":" + std::to_string(col);
}

// Column names are non-empty and distinct.
Status CheckHeader(const CsvRow& row, std::string_view path) {
  std::unordered_set<std::string> seen;
  for (size_t i = 0; i < row.fields.size(); ++i) {
    if (row.fields[i].empty()) {
      return InvalidArgumentError(Loc(path, row.line, row.columns[i]) + ": empty column name in header");
    }
    if (!seen.insert(row.fields[i]).second) {
      return InvalidArgumentError(Loc(path, row.line, row.columns[i]) + ": duplicate column '" +
                                  row.fields[i] + "' in header");
    }
  }
  return Status::Ok();
}

}  // namespace

std::optional<size_t> CsvTable::ColumnIndex(std::string_view name) const {
  for (size_t i = 0; i < header.size(); ++i) {
    if (header[i] == name) return i;
  }
  return std::nullopt;
}

std::string CsvTable::Where(const CsvRow& row, size_t col) const {
  return Loc(path, row.line, col < row.columns.size() ? row.columns[col] : 1);
}

StatusOr<CsvTable> ParseCsv(std::string_view text, std::string_view path) {
  CsvTable table;
  table.path = std::string(path);
  // Strip a UTF-8 byte order mark.
  if (text.substr(0, 3) == "\xEF\xBB\xBF") text.remove_prefix(3);

  size_t pos = 0;
  int line = 1;
  bool have_header = false;
  while (pos < text.size()) {
    CsvRow row;
    row.line = line;
    int col = 1;
    size_t line_start = pos;
    bool end_of_record = false;
    bool blank = true;
    while (!end_of_record) {
      // One field.
      std::string field;
      const int field_col = col;
      if (pos < text.size() && text[pos] == '"') {
        blank = false;
        ++pos;
        ++col;
        bool closed = false;
        while (pos < text.size()) {
          char c = text[pos];
          if (c == '\0') return InvalidArgumentError(Loc(path, line, col) + ": NUL byte in input");
          if (c == '"') {
            if (pos + 1 < text.size() && text[pos + 1] == '"') {
              field += '"';
              pos += 2;
              col += 2;
              continue;
            }
            ++pos;
            ++col;
            closed = true;
            break;
          }
          if (c == '\n') {
            ++line;
            col = 0;
            line_start = pos + 1;
          }
          field += c;
          ++pos;
          ++col;
          if (pos - line_start > kMaxLineBytes) {
            return InvalidArgumentError(Loc(path, line, col) + ": line longer than 64 KiB");
          }
        }
        if (!closed) {
          return InvalidArgumentError(Loc(path, row.line, field_col) + ": unterminated quoted field");
        }
        if (pos < text.size() && text[pos] != ',' && text[pos] != '\n' && text[pos] != '\r') {
          return InvalidArgumentError(Loc(path, line, col) + ": unexpected character after closing quote");
        }
      } else {
        while (pos < text.size() && text[pos] != ',' && text[pos] != '\n' && text[pos] != '\r') {
          char c = text[pos];
          if (c == '\0') return InvalidArgumentError(Loc(path, line, col) + ": NUL byte in input");
          if (c == '"') {
            return InvalidArgumentError(Loc(path, line, col) + ": quote inside an unquoted field");
          }
          field += c;
          ++pos;
          ++col;
          if (pos - line_start > kMaxLineBytes) {
            return InvalidArgumentError(Loc(path, line, col) + ": line longer than 64 KiB");
          }
        }
        if (!field.empty()) blank = false;
      }
      row.fields.push_back(std::move(field));
      row.columns.push_back(field_col);
      // Field separator or record end.
      if (pos >= text.size()) {
        end_of_record = true;
      } else if (text[pos] == ',') {
        blank = false;
        ++pos;
        ++col;
      } else {
        if (text[pos] == '\r') {
          ++pos;
          if (pos < text.size() && text[pos] != '\n') {
            return InvalidArgumentError(Loc(path, line, col) + ": carriage return inside a line");
          }
        }
        if (pos < text.size()) ++pos;  // '\n'
        ++line;
        col = 1;
        end_of_record = true;
      }
    }
    if (blank && row.fields.size() == 1) continue;  // empty line
    if (!have_header) {
      TESSERA_RETURN_IF_ERROR(CheckHeader(row, path));
      table.header = std::move(row.fields);
      have_header = true;
      continue;
    }
    if (row.fields.size() != table.header.size()) {
      return InvalidArgumentError(Loc(path, row.line, 1) + ": expected " +
                                  std::to_string(table.header.size()) + " fields, found " +
                                  std::to_string(row.fields.size()));
    }
    table.rows.push_back(std::move(row));
  }
  if (!have_header) return InvalidArgumentError(std::string(path) + ":1:1: empty file (no header)");
  return table;
}

StatusOr<CsvTable> ReadCsvFile(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) {
    return InvalidArgumentError(path + ":0:0: is a directory, expected a CSV file");
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return NotFoundError(path + ":0:0: cannot open file: " + std::strerror(errno));
  }
  std::ostringstream buf;
  buf << in.rdbuf();
  if (in.bad()) return DataLossError(path + ":0:0: read error");
  return ParseCsv(buf.str(), path);
}

}  // namespace tessera::sim
