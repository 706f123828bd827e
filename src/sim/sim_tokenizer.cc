#include "sim/sim_tokenizer.h"

#include <filesystem>
#include <system_error>

#include "tokenize/hf_tokenizer.h"
#include "tokenize/simple_tokenizer.h"

namespace kvroute::sim {

std::expected<tokenize::TokenizerPtr, std::string> LoadSimTokenizer(const std::string& spec) {
  if (spec.empty()) return std::make_shared<tokenize::SimpleTokenizer>();
  std::error_code ec;
  std::string dir = spec;
  if (!std::filesystem::is_directory(spec, ec)) {
    auto shipped = tokenize::FindShippedModelDir(spec);
    if (!shipped) {
      std::string names;
      for (const auto& n : tokenize::ShippedModelNames()) names += (names.empty() ? "" : ", ") + n;
      return std::unexpected("--tokenizer '" + spec +
                             "' is neither a model directory nor a shipped model (" + names +
                             "): " + shipped.error());
    }
    dir = std::move(*shipped);
  }
  auto tokenizer = tokenize::LoadHfTokenizer(dir);
  if (!tokenizer) return std::unexpected("--tokenizer " + dir + ": " + tokenizer.error());
  return std::move(*tokenizer);
}

}  // namespace kvroute::sim
