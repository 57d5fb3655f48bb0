// The bytes of a file a user hands to tessera, before a parser sees them: gzip-compressed input is
// decompressed transparently, and bytes a parser cannot read are described in words.
//
// Called by the CLI after it reads a usage ledger or a series (`tessera bill --usage
// ledger.jsonl.gz`, `tessera anomalies --input`, `tessera forecast --input`, `tessera plan capacity
// --history`), by the ledger parser to say what an unreadable first line looks like, and by the
// ledger fuzzer. Pure: no I/O (the caller reads the file; `source_name` only names it in errors).
// Thread-safety: free functions over values. zlib stays behind this header.
//
//   DecompressIfGzip("{\"tenant\":...}\n", "ledger.jsonl")  -> the same bytes (not gzip)
//   DecompressIfGzip(<gzip of "a\n"> + <gzip of "b\n">, "x.gz")  -> "a\nb\n" (members joined, as
//                                                                  gzip -dc does)
//   DecompressIfGzip(<those bytes cut short>, "x.gz")
//       -> INVALID_ARGUMENT "x.gz: gzip data is truncated (the stream ends after 23 of its bytes)"
//   DescribeBytes("\x1f\x8b\x08...")        -> "gzip-compressed data"
//   DescribeBytes("tenant,hour,gpus\n...")  -> "CSV (commas, no '{')"
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "tessera/core/status.h"

namespace tessera {

struct DecompressOptions {
  // Decompressed bytes allowed; more is RESOURCE_EXHAUSTED (a gzip bomb, or not a ledger).
  uint64_t max_output_bytes = uint64_t{4} << 30;  // 4 GiB
};

// True when `bytes` start with gzip's magic number 0x1f 0x8b (RFC 1952).
bool IsGzip(std::string_view bytes);

// `bytes` unchanged when they are not gzip; otherwise the decompressed bytes of every member
// (concatenated members are joined). Errors name `source_name`: INVALID_ARGUMENT for corrupt or
// truncated data and for bytes after the last member that are not another member;
// RESOURCE_EXHAUSTED past options.max_output_bytes.
StatusOr<std::string> DecompressIfGzip(std::string_view bytes, std::string_view source_name,
                                       const DecompressOptions& options = {});

// What `bytes` look like, in a few words, for an error on a file a parser could not read at its
// first line: "gzip-compressed data", "zip-compressed data" (also bzip2, xz, zstd), "binary data"
// (a NUL or control bytes), "CSV (commas, no '{')", "a JSON array (not one object per line)",
// "a JSON object spread over several lines ..."; "" when nothing is recognised (an empty line too). Only the first line (at most 4 KiB) is read.
std::string DescribeBytes(std::string_view bytes);

}  // namespace tessera
