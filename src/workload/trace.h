// Workload traces: parsers for the public trace formats kvroute bench replays.
//
// Mooncake JSONL (kvcache-ai/Mooncake FAST25-release/traces): one object per line,
//   {"timestamp": ms, "input_length": tokens, "output_length": tokens, "hash_ids": [int...]}
//   hash_ids name 512-token prefix blocks (the last one may be partial): equal ids at equal
//   positions mean equal prefixes.
// Azure LLM inference CSV (Azure/AzurePublicDataset 2023/2024):
//   header TIMESTAMP,ContextTokens,GeneratedTokens; TIMESTAMP is wall-clock text
//   "2023-11-16 18:17:03.9799600". No prefix information: arrivals and lengths only.
//
// Both parsers accept any file of their format, report the first bad line with its number,
// and never crash on malformed input.
//
// Thread safety: pure functions.
#pragma once

#include <cstdint>
#include <expected>
#include <istream>
#include <string>
#include <vector>

namespace kvroute::workload {

struct TraceRequest {
  double arrival_s = 0;                // seconds since the first request of the trace
  std::uint32_t input_tokens = 0;
  std::uint32_t output_tokens = 0;
  std::vector<std::uint64_t> hash_ids;  // Mooncake only; empty for Azure
};

struct Trace {
  std::vector<TraceRequest> requests;   // sorted by arrival
  std::uint32_t hash_block_tokens = 0;  // 512 for Mooncake; 0 when the trace has no hash ids
};

// Error text names the line: "line 17: input_length must be a non-negative integer".
std::expected<Trace, std::string> ParseMooncakeJsonl(std::istream& in);
std::expected<Trace, std::string> ParseAzureCsv(std::istream& in);

// Picks the parser from the extension (.jsonl → Mooncake, .csv → Azure).
std::expected<Trace, std::string> LoadTrace(const std::string& path);

// Parses "YYYY-MM-DD HH:MM:SS[.fraction]" into seconds since the Unix epoch (UTC).
std::expected<double, std::string> ParseAzureTimestamp(std::string_view text);

}  // namespace kvroute::workload
