#include "tessera/core/input_bytes.h"

#include <algorithm>
#include <cstdio>

#define ZLIB_CONST  // next_in is a pointer to const: the input is never written
#include <zlib.h>

namespace tessera {
namespace {

// zlib counts bytes in 32-bit uInt: larger inputs are handed over in pieces of at most this.
constexpr size_t kMaxFeedBytes = size_t{1} << 30;
constexpr size_t kOutputChunkBytes = 256 * 1024;

// A zlib inflate stream for gzip members (windowBits 15 + 16: the gzip wrapper only), ended on
// every path.
class GzipInflater {
 public:
  GzipInflater() { ready_ = inflateInit2(&stream_, 15 + 16) == Z_OK; }
  ~GzipInflater() {
    if (ready_) inflateEnd(&stream_);
  }
  GzipInflater(const GzipInflater&) = delete;
  GzipInflater& operator=(const GzipInflater&) = delete;

  bool ready() const { return ready_; }
  z_stream& stream() { return stream_; }

 private:
  z_stream stream_{};
  bool ready_ = false;
};

// The input as zlib sees it: handed over in pieces, with the position of the next unread byte.
class InputFeed {
 public:
  InputFeed(std::string_view bytes, z_stream& stream) : bytes_(bytes), stream_(stream) {}
  void TopUp() {
    if (stream_.avail_in != 0 || fed_ == bytes_.size()) return;
    const size_t n = std::min(bytes_.size() - fed_, kMaxFeedBytes);
    stream_.next_in = reinterpret_cast<const Bytef*>(bytes_.data() + fed_);
    stream_.avail_in = static_cast<uInt>(n);
    fed_ += n;
  }
  bool exhausted() const { return stream_.avail_in == 0 && fed_ == bytes_.size(); }
  size_t position() const { return fed_ - stream_.avail_in; }
  std::string_view rest() const { return bytes_.substr(position()); }

 private:
  std::string_view bytes_;
  z_stream& stream_;
  size_t fed_ = 0;
};

// 4294967296 -> "4 GiB", 1048576 -> "1 MiB", 1000 -> "1000 bytes".
std::string FormatBytes(uint64_t bytes) {
  char buf[48];
  if (bytes >= (uint64_t{1} << 30)) {
    std::snprintf(buf, sizeof buf, "%.3g GiB", static_cast<double>(bytes) / (uint64_t{1} << 30));
  } else if (bytes >= (uint64_t{1} << 20)) {
    std::snprintf(buf, sizeof buf, "%.3g MiB", static_cast<double>(bytes) / (uint64_t{1} << 20));
  } else {
    std::snprintf(buf, sizeof buf, "%llu bytes", static_cast<unsigned long long>(bytes));
  }
  return buf;
}

// What follows the end of a gzip member: nothing (or zero padding, which gzip -dc also ignores)
// ends the data; another member is read on; anything else is an error.
enum class AfterMember { kEnd, kAnotherMember, kTrailingGarbage };
AfterMember Classify(std::string_view rest) {
  if (rest.find_first_not_of('\0') == std::string_view::npos) return AfterMember::kEnd;
  return IsGzip(rest) ? AfterMember::kAnotherMember : AfterMember::kTrailingGarbage;
}

// The error for an inflate() result other than Z_OK and Z_STREAM_END.
Status InflateFailure(int rc, const z_stream& z, const InputFeed& input, const std::string& where) {
  if (rc == Z_BUF_ERROR && input.exhausted()) {
    return InvalidArgumentError(where + ": gzip data is truncated (the stream ends after " +
                                std::to_string(input.position()) + " of its bytes)");
  }
  if (rc == Z_DATA_ERROR) {
    return InvalidArgumentError(where + ": corrupt gzip data near byte " + std::to_string(input.position()) +
                                " (zlib: " + (z.msg != nullptr ? z.msg : "invalid data") + ")");
  }
  if (rc == Z_MEM_ERROR) return ResourceExhaustedError(where + ": out of memory while decompressing");
  // Z_BUF_ERROR with input left cannot happen (each call gets a fresh output chunk); never loop on it.
  return InternalError(where + ": zlib's inflate returned " + std::to_string(rc));
}

}  // namespace

bool IsGzip(std::string_view bytes) {
  return bytes.size() >= 2 && static_cast<unsigned char>(bytes[0]) == 0x1f &&
         static_cast<unsigned char>(bytes[1]) == 0x8b;
}

StatusOr<std::string> DecompressIfGzip(std::string_view bytes, std::string_view source_name,
                                       const DecompressOptions& options) {
  if (!IsGzip(bytes)) return std::string(bytes);
  const std::string where(source_name);
  GzipInflater inflater;
  if (!inflater.ready()) return ResourceExhaustedError(where + ": cannot start zlib's decompressor");
  z_stream& z = inflater.stream();
  InputFeed input(bytes, z);
  std::string out;
  std::string chunk(kOutputChunkBytes, '\0');  // on the heap: callers may run on small stacks
  for (;;) {
    input.TopUp();
    z.next_out = reinterpret_cast<Bytef*>(chunk.data());
    z.avail_out = static_cast<uInt>(chunk.size());
    const int rc = inflate(&z, Z_NO_FLUSH);
    const size_t produced = chunk.size() - z.avail_out;
    if (out.size() + produced > options.max_output_bytes) {
      return ResourceExhaustedError(where + ": decompresses to more than " + FormatBytes(options.max_output_bytes) +
                                    " (the limit); is it really a ledger or series?");
    }
    out.append(chunk.data(), produced);
    if (rc == Z_OK) continue;
    if (rc != Z_STREAM_END) return InflateFailure(rc, z, input, where);
    const AfterMember next = Classify(input.rest());
    if (next == AfterMember::kEnd) return out;
    if (next == AfterMember::kTrailingGarbage) {
      return InvalidArgumentError(where + ": " + std::to_string(input.rest().size()) +
                                  " bytes after the end of the gzip data (at byte " + std::to_string(input.position()) +
                                  ") are not another gzip member");
    }
    inflateReset(&z);  // concatenated members, as `cat a.gz b.gz` makes: read on
  }
}

std::string DescribeBytes(std::string_view bytes) {
  struct Magic {
    std::string_view prefix;
    const char* what;
  };
  static constexpr Magic kCompressed[] = {
      {"\x1f\x8b", "gzip-compressed data"},
      {"PK\x03\x04", "zip-compressed data"},
      {"BZh", "bzip2-compressed data"},
      {"\xfd" "7zXZ", "xz-compressed data"},
      {"\x28\xb5\x2f\xfd", "zstd-compressed data"},
  };
  for (const Magic& m : kCompressed) {
    if (bytes.substr(0, m.prefix.size()) == m.prefix) return m.what;
  }
  if (bytes.substr(0, 3) == "\xEF\xBB\xBF") bytes.remove_prefix(3);  // a UTF-8 byte-order mark
  const std::string_view line = bytes.substr(0, std::min(bytes.find('\n'), size_t{4096}));
  const bool control = std::any_of(line.begin(), line.end(), [](char c) {
    const auto u = static_cast<unsigned char>(c);
    return (u < 0x20 && c != '\t' && c != '\r') || u == 0x7f;
  });
  if (control) return "binary data";
  const size_t first = line.find_first_not_of(" \t\r");
  if (first == std::string_view::npos) return "";
  if (line[first] == '[') return "a JSON array (not one object per line)";
  if (line[first] == '{' && line.find_first_not_of(" \t\r", first + 1) == std::string_view::npos) {
    return "a JSON object spread over several lines (not one object per line)";
  }
  if (line.find(',') != std::string_view::npos && line.find('{') == std::string_view::npos) {
    return "CSV (commas, no '{')";
  }
  return "";
}

}  // namespace tessera
