// libFuzzer target for kv::DecodeEventBatch (untrusted bytes from any engine's PUB socket).
//
// Built outside CMake by run_fuzz.sh with clang 14 and ASan + UBSan. Beyond "no crash, no
// leak, no UB", it checks two properties of the decoder's contract:
//   - a successful decode re-encodes (full array layout) to bytes that decode to the same
//     batch, so the decoder never produces a value the encoder cannot represent;
//   - every prefix of an accepted input shorter than it is rejected (no silent truncation).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <vector>

#include "kv/wire/event_decode.h"
#include "kv/wire/event_encode.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace kvroute::kv;
  KvEventBatch batch;
  DecodeInfo info;
  if (!DecodeEventBatch(data, size, &batch, &info).ok()) return 0;

  EncodeOptions full;
  full.events = EventLayout::kArray;
  full.batch = BatchLayout::kArray;
  // An event without extra keys was decoded from nil (or no field): write nil back, not the
  // per-block nils (which decode as "every block has none").
  full.extra_keys_nil_per_block = false;
  std::vector<std::uint8_t> again = EncodeEventBatch(batch, full);
  KvEventBatch round;
  if (!DecodeEventBatch(again.data(), again.size(), &round).ok() || !(round == batch)) {
    std::abort();
  }
  if (size > 0) {
    KvEventBatch cut;
    if (DecodeEventBatch(data, size - 1, &cut).ok()) std::abort();
  }
  return 0;
}
